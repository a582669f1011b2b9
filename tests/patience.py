"""How long a test waits for something that must happen (a reply, a line, a process to start
or end) before it gives up. Every such wait ends on the event itself; this bound only turns a
hang into a failure, so it is generous: six `companion` processes on two cores that other jobs
also load took over 70 s to do what takes 10 s on an idle machine. A wait that expects nothing
to happen (a negative check) uses its own short bound, never this one."""

PATIENCE = 240.0
