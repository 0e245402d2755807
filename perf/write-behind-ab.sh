#!/usr/bin/env bash
# The defaults (write-behind through a page-cache journal, arm "behind")
# against each append writing its segment before it is answered, with a
# direct-I/O journal (arm "direct": `--write-behind-ms 0
# --journal-page-cache false`, the defaults through 980c391):
# perf/broker-ab.sh with these arms. About 18 minutes; DURATION, REPS and
# WORKLOADS as there.
set -euo pipefail
ARM_A="behind=" ARM_B="direct=--write-behind-ms 0 --journal-page-cache false" KIND=write-behind-ab \
    exec "$(dirname "$0")/broker-ab.sh"
