# SPDX-License-Identifier: MIT
# Sourced by the e2e-*.sh tests: run NAME ENV... PROGRAM runs one program
# with the environment given, its output in guest/tests/NAME.out, and
# says how it went; a failure sets rc=1 and shows the output's tail.
rc=0
run() {
	name=$1
	shift
	env "$@" >"guest/tests/$name.out" 2>&1
	s=$?
	case $s in
	0) echo "$name: passed" ;;
	77) echo "$name: skipped" ;;
	*) echo "$name: FAILED ($s)"; tail -40 "guest/tests/$name.out"; rc=1 ;;
	esac
}
