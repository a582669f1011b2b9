"""How long a test waits for something that must happen (a reply, a line, a process to start
or end) before it gives up. Every such wait ends on the event itself; this bound only turns a
hang into a failure, so it is generous: six `companion` processes on two cores that other jobs
also load took over 70 s to do what takes 10 s on an idle machine. A wait that expects nothing
to happen (a negative check) uses its own short bound, never this one.

The mutation check (tests/mutants/run.py) sets COMPANION_TEST_PATIENCE lower for its runs: a
mutant that stops an event from ever happening is killed when the wait gives up, and ten such
mutants set the check's length. A lower bound can only turn more runs into failures, never
hide a survivor; the check's baseline runs every killing test with the same bound on the
unmutated code, so a bound too short for the machine fails the check instead of passing it."""

import os

PATIENCE = float(os.environ.get("COMPANION_TEST_PATIENCE", "240"))
