//go:build !race

package app_test

const idleSessions = 10000
