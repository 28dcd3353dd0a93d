#!/usr/bin/env bash
# The worked example end to end (see README.md): start the example agent, run MIRAGE against it
# through the OpenAI-compatible adapter, compare the R_tool labels with the agent's own log.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python examples/own_agent/run.py "$@"
