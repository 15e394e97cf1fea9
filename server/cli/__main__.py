"""`python -m server.cli`, as the `chronomem` executable."""

from . import main

main(prog_name="chronomem")
