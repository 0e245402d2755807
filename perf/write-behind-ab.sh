#!/usr/bin/env bash
# Write-behind (`--write-behind-ms 10`, arm "behind") against each append
# writing its segment (the default, arm "direct"): perf/broker-ab.sh with
# these arms. About 12 minutes; DURATION, REPS and WORKLOADS as there.
set -euo pipefail
ARM_A="behind=--write-behind-ms ${WRITE_BEHIND_MS:-10}" ARM_B="direct=" KIND=write-behind-ab \
    exec "$(dirname "$0")/broker-ab.sh"
