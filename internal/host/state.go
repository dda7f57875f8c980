package host

// State is a server's runtime state, as the management protocol reports it in
// runtime.state. docs/host.md describes each one and the transitions between them;
// [Transitions] is the same table in code, and the tests check that the host makes
// every one of those transitions and no other.
type State string

const (
	StateNotStarted   State = "not_started"   // installed and enabled; not run since it was installed (lazy start)
	StateDisabled     State = "disabled"      // policy.enabled is false: nothing runs, calls are refused
	StateStarting     State = "starting"      // a connection is being dialled (process start + handshake)
	StateReady        State = "ready"         // a connection is live and healthy
	StateDegraded     State = "degraded"      // a connection is live but its last health ping was slow or failed
	StateAuthRequired State = "auth_required" // the upstream refused our credentials; not retried until they change
	StateFailed       State = "failed"        // crash loop: the circuit is open until the next probe
	StateStopping     State = "stopping"      // connections are being closed (idle, disable, uninstall, shutdown)
	StateStopped      State = "stopped"       // ran before, nothing runs now; the next use starts it again
	StateRestarting   State = "restarting"    // between two connections: closing the old one or waiting out the backoff
)

// States lists the ten states in the order docs/host.md presents them.
var States = []State{
	StateNotStarted, StateDisabled, StateStarting, StateReady, StateDegraded,
	StateAuthRequired, StateFailed, StateStopping, StateStopped, StateRestarting,
}

// Live reports whether a server in state s has a connection answering calls.
func (s State) Live() bool { return s == StateReady || s == StateDegraded }

// Valid reports whether s is one of the ten states.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Transitions is every state change the host makes, from → to. Anything not listed
// never happens (TestTransitionTable and the randomized schedule test check both
// directions). docs/host.md explains what causes each one.
var Transitions = map[State][]State{
	StateNotStarted:   {StateStarting, StateDisabled},
	StateDisabled:     {StateNotStarted, StateStopped, StateStarting},
	StateStarting:     {StateReady, StateRestarting, StateFailed, StateAuthRequired, StateStopping},
	StateReady:        {StateDegraded, StateRestarting, StateFailed, StateAuthRequired, StateStopping},
	StateDegraded:     {StateReady, StateRestarting, StateFailed, StateAuthRequired, StateStopping},
	StateAuthRequired: {StateStarting, StateDisabled, StateStopped, StateRestarting, StateStopping},
	StateFailed:       {StateStarting, StateDisabled, StateStopped, StateRestarting, StateStopping},
	StateStopping:     {StateStopped, StateDisabled, StateRestarting, StateStarting, StateReady, StateAuthRequired, StateFailed},
	StateStopped:      {StateStarting, StateDisabled},
	StateRestarting:   {StateStarting, StateStopping, StateStopped, StateDisabled, StateReady, StateFailed, StateAuthRequired},
}

// Allowed reports whether from → to is in [Transitions].
func Allowed(from, to State) bool {
	for _, t := range Transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// Reason is a stable word saying why a server entered its state (the health's status
// reason). docs/host.md lists them.
type Reason string

const (
	ReasonInstalled        Reason = "installed"           // the definition was installed
	ReasonFirstUse         Reason = "first_use"           // a call (or catalogue refresh) needed it
	ReasonWarm             Reason = "warm"                // Host.Warm: a caller session that publishes its tools opened
	ReasonRequired         Reason = "required"            // required servers start with the host
	ReasonStarted          Reason = "started"             // the handshake succeeded
	ReasonStartFailed      Reason = "start_failed"        // the dial failed; a retry is scheduled
	ReasonCrashed          Reason = "crashed"             // the connection ended without being asked to
	ReasonCrashLoop        Reason = "crash_loop"          // too many failures: circuit open
	ReasonRetry            Reason = "retry"               // the backoff elapsed: starting again
	ReasonProbe            Reason = "probe"               // the circuit's cool-down elapsed: one trial start
	ReasonAuthRequired     Reason = "auth_required"       // the upstream refused our credentials
	ReasonPingSlow         Reason = "ping_slow"           // a health ping answered, but slowly
	ReasonPingFailed       Reason = "ping_failed"         // a health ping got no answer
	ReasonRecovered        Reason = "recovered"           // a health ping answered promptly again
	ReasonHealthFailed     Reason = "health_check_failed" // consecutive ping failures: restarting
	ReasonIdle             Reason = "idle"                // no call for the idle timeout
	ReasonDisabled         Reason = "disabled"            // policy.enabled set to false
	ReasonEnabled          Reason = "enabled"             // policy.enabled set to true
	ReasonRestartRequested Reason = "restart_requested"   // Host.Restart
	ReasonConfigChanged    Reason = "config_changed"      // Host.Update with another fingerprint or isolation
	ReasonRemoved          Reason = "removed"             // Host.Remove
	ReasonShutdown         Reason = "shutdown"            // Host.Shutdown
	ReasonSessionEnded     Reason = "session_ended"       // Host.EndSession closed a per-session connection
	ReasonStopped          Reason = "stopped"             // a connection finished closing
)
