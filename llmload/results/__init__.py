"""Request records, the run's files, pure statistics over them, and the printed result block."""
