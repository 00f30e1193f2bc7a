#!/bin/sh
# The project's test suite.
got=$(sh calc.sh 2 3)
if [ "$got" = "5" ]; then echo "PASS add 2 3 = 5"; else echo "FAIL add 2 3: expected 5, got $got"; exit 1; fi
