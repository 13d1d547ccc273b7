"""What every stage leans on and none owns: child processes and signals (processes), ports it listens on
(listening), control calls to the server (control_http), exact timers (timerfd) and atomic file writes (files)."""
