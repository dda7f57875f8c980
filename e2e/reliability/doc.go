// Package reliability drives the real toolgate binary through what machines do to a
// gateway: upstreams that crash, hang, flood and break the protocol; serve started
// and stopped with upstreams running; concurrent sessions while all of that happens;
// load. Each test counts what it claims (processes by argv marker and process group,
// descriptors and RSS of serve from /proc, temporary files, audit events) rather than
// assuming it. docs/reliability.md gives the figures and the commands that produced
// them.
package reliability
