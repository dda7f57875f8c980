//go:build race

package app_test

const idleSessions = 2000
