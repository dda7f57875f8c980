package store

// ListenerConnects reports how many times c's listener has connected and LISTENed.
func ListenerConnects(c *Changes) int64 { return c.connects.Load() }
