#!/usr/bin/env bash
# The scan step of the composite action (action.yml). Inputs come as INPUT_IMAGE, INPUT_GPUS,
# INPUT_DRIVER, INPUT_FAIL_ON (environment, never interpolated into the script); writes
# cudalint.sarif and cudalint.md under RUNNER_TEMP, the Markdown summary to
# GITHUB_STEP_SUMMARY and `exit-code` to GITHUB_OUTPUT. Exits 0: the gate is a later step, so
# the SARIF upload runs first. An empty `gpus` input leaves the targets to cudalint.toml or
# CUDALINT_GPU; with none anywhere the scan stops (exit 2) and the summary says why.
set -uo pipefail
: "${INPUT_IMAGE:?the action needs the input 'image'}"
out=${RUNNER_TEMP:?}
rm -f "$out/cudalint.sarif" "$out/cudalint.md" "$out/cudalint.err"
args=(scan --quiet --format "sarif=$out/cudalint.sarif" --format "markdown=$out/cudalint.md" --format text)
[[ -n "${INPUT_GPUS:-}" ]] && args+=(--gpu "$INPUT_GPUS")
[[ -n "${INPUT_DRIVER:-}" ]] && args+=(--driver "$INPUT_DRIVER")
[[ -n "${INPUT_FAIL_ON:-}" ]] && args+=(--fail-on "$INPUT_FAIL_ON")
# After `--`: an image input such as `--help` is an image name (and fails to open), never a flag
# that exits 0 with no report.
args+=(-- "$INPUT_IMAGE")
# stderr kept for the summary when the scan stops, then copied to the log. Not through
# `2> >(tee ...)`: the summary could be read before tee had written it all (the scan is --quiet,
# so nothing is lost by showing it at the end).
"${CUDALINT:-cudalint}" "${args[@]}" 2>"$out/cudalint.err"
rc=$?
# A run that passed must have written its reports: otherwise it judged nothing.
if [[ $rc -eq 0 && ! -f "$out/cudalint.md" ]]; then
  echo "cudalint: the scan exited 0 but wrote no report; failing the gate" >>"$out/cudalint.err"
  rc=2
fi
cat "$out/cudalint.err" >&2
echo "exit-code=$rc" >>"${GITHUB_OUTPUT:?}"
# GitHub refuses a step summary over 1 MiB (and then shows none): a longer report is cut, and
# says where the whole one is.
limit=$((1000 * 1000))
if [[ -f "$out/cudalint.md" && $(stat -c %s "$out/cudalint.md") -gt $limit ]]; then
  {
    head -c "$limit" "$out/cudalint.md" | sed '$d'
    printf '\n\n… the report is cut here (GitHub shows at most 1 MiB); the whole one is `%s`\n' "$out/cudalint.md"
  } >>"${GITHUB_STEP_SUMMARY:?}"
elif [[ -f "$out/cudalint.md" ]]; then
  cat "$out/cudalint.md" >>"${GITHUB_STEP_SUMMARY:?}"
else
  {
    printf '## ❌ cudalint: the scan of `%s` did not finish (exit %s)\n\n' "$INPUT_IMAGE" "$rc"
    printf '```\n'
    grep -v '^$' "$out/cudalint.err" | tail -n 20
    printf '```\n'
  } >>"${GITHUB_STEP_SUMMARY:?}"
fi
exit 0
