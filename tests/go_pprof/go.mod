module pprt.dev/tests/gopprof

go 1.18
