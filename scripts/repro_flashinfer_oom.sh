#!/usr/bin/env bash
# Reproduce the gsm8k out-of-memory report behind harness on a real GPU, with the real vLLM.
#
# Runs the upstream command
#   VLLM_USE_V1=1 VLLM_ATTENTION_BACKEND=FLASHINFER lm_eval --model vllm \
#     --model_args pretrained=meta-llama/Llama-3.1-8B-Instruct --tasks gsm8k --num_fewshot 5 \
#     --batch_size auto
# against the vLLM and lm-eval installed for $PYTHON, samples the GPU's used memory through NVML
# while it runs, and writes a report: peak used memory, the KV cache size vLLM logged, and the
# gsm8k accuracy or the out-of-memory text. With --check-scaling it then runs the engine twice
# with two num_gpu_blocks_override values and fails when per-step memory grows with the number of
# KV cache blocks (python -m harness.eval.vllm_probe compare).
# Status: written against lm-eval 0.4.13's CLI and vLLM's engine arguments; not yet run on a GPU.
#
# Usage: scripts/repro_flashinfer_oom.sh [--model M] [--limit N] [--out DIR] [--gpu I]
#                                       [--backend FLASHINFER|FLASH_ATTN] [--check-scaling]
# Environment: PYTHON (an interpreter with vllm, lm_eval and nvidia-ml-py; default python3).
# Exit: 0 the evaluation finished (and nothing scaled), 1 out of memory (or something scaled),
#       2 usage or environment errors (no GPU, vLLM or lm-eval missing).
set -euo pipefail

MODEL="meta-llama/Llama-3.1-8B-Instruct"
LIMIT=""
OUT="repro-flashinfer-oom"
GPU="0"
BACKEND="FLASHINFER"
CHECK_SCALING=0
PYTHON="${PYTHON:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
  exit "$1"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="${2:?--model needs a value}"; shift 2 ;;
    --limit) LIMIT="${2:?--limit needs a value}"; shift 2 ;;
    --out) OUT="${2:?--out needs a value}"; shift 2 ;;
    --gpu) GPU="${2:?--gpu needs a value}"; shift 2 ;;
    --backend) BACKEND="${2:?--backend needs a value}"; shift 2 ;;
    --check-scaling) CHECK_SCALING=1; shift ;;
    -h | --help) usage 0 ;;
    *) echo "repro: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

fail_env() {
  echo "repro: $1" >&2
  exit 2
}

command -v "$PYTHON" >/dev/null || fail_env "no Python interpreter '$PYTHON' (set PYTHON)"
"$PYTHON" - <<'EOF' || fail_env "needs CUDA, vllm, lm_eval and nvidia-ml-py for \$PYTHON (pip install vllm lm-eval nvidia-ml-py)"
import importlib.util, sys
missing = [m for m in ("vllm", "lm_eval", "pynvml") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"missing: {', '.join(missing)}")
import torch
if not torch.cuda.is_available():
    sys.exit("torch sees no CUDA device")
EOF

mkdir -p "$OUT"
LOG="$OUT/lm_eval.log"
SAMPLES="$OUT/nvml.csv"
REPORT="$OUT/report.json"

# GPU $GPU is NVML's index (PCI bus order, as nvidia-smi shows). CUDA's default order is "fastest
# first", so the index alone may name another device there: lm_eval gets the device's UUID instead.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
GPU_UUID="$("$PYTHON" -c 'import sys, pynvml; pynvml.nvmlInit(); u = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[1]))); print(u.decode() if isinstance(u, bytes) else u)' "$GPU")" ||
  fail_env "NVML has no GPU $GPU"

# NVML sampler: used and total bytes of GPU $GPU every 100 ms until it is stopped.
"$PYTHON" - "$GPU" "$SAMPLES" <<'EOF' &
import sys, time
import pynvml
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[1]))
with open(sys.argv[2], "w", buffering=1) as out:
    out.write("time_s,used_bytes,total_bytes\n")
    start = time.monotonic()
    while True:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        out.write(f"{time.monotonic() - start:.2f},{info.used},{info.total}\n")
        time.sleep(0.1)
EOF
SAMPLER=$!
trap 'kill "$SAMPLER" 2>/dev/null || true' EXIT
# lm_eval starts once the first sample is written: a run that fails at once still has its GPU
# sampled (and a loaded machine cannot stop the sampler before it opened its file).
for _ in $(seq 300); do
  [[ "$(wc -l <"$SAMPLES" 2>/dev/null || echo 0)" -ge 2 ]] && break
  kill -0 "$SAMPLER" 2>/dev/null || fail_env "the NVML sampler of GPU $GPU exited"
  sleep 0.1
done

limit_args=()
if [[ -n "$LIMIT" ]]; then
  limit_args=(--limit "$LIMIT")
fi

echo "repro: lm_eval gsm8k 5-shot on $MODEL with $BACKEND (log: $LOG)"
set +e
CUDA_VISIBLE_DEVICES="$GPU_UUID" VLLM_USE_V1=1 VLLM_ATTENTION_BACKEND="$BACKEND" \
  "$PYTHON" -m lm_eval --model vllm \
  --model_args "pretrained=$MODEL,gpu_memory_utilization=0.9" \
  --tasks gsm8k --num_fewshot 5 --batch_size auto \
  --output_path "$OUT/lm_eval" ${limit_args[@]+"${limit_args[@]}"} >"$LOG" 2>&1
STATUS=$?
set -e
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true

"$PYTHON" - "$STATUS" "$LOG" "$SAMPLES" "$OUT/lm_eval" "$REPORT" "$MODEL" "$BACKEND" <<'EOF'
import csv, glob, importlib.metadata, json, os, re, sys
status, log, samples, results_dir, report, model, backend = sys.argv[1:]
text = open(log, errors="replace").read()
rows = list(csv.DictReader(open(samples))) if os.path.exists(samples) else []
peak = max((int(r["used_bytes"]) for r in rows), default=0)
total = int(rows[0]["total_bytes"]) if rows else 0
kv_lines = [
    line.strip()
    for line in text.splitlines()
    if re.search(r"GPU KV cache size|Available KV cache memory|num_gpu_blocks|# GPU blocks", line)
]
oom = [line.strip() for line in text.splitlines() if "out of memory" in line.lower()]
accuracy = None
for path in sorted(glob.glob(os.path.join(results_dir, "**", "results_*.json"), recursive=True)):
    results = json.load(open(path))["results"].get("gsm8k", {})
    accuracy = {k: v for k, v in results.items() if k.startswith("exact_match")}
versions = {}
for dist in ("vllm", "torch", "flashinfer-python", "lm-eval", "nvidia-ml-py"):
    try:
        versions[dist] = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        versions[dist] = None
result = {
    "versions": versions,
    "model": model,
    "attention_backend": backend,
    "lm_eval_exit_status": int(status),
    "nvml_peak_used_bytes": peak,
    "nvml_total_bytes": total,
    "nvml_samples": len(rows),
    "kv_cache_log": kv_lines,
    "accuracy": accuracy,
    "out_of_memory": oom[:5],
}
json.dump(result, open(report, "w"), indent=2)
gib = 1024**3
print(f"peak used {peak / gib:.2f} GiB of {total / gib:.2f} GiB ({len(rows)} NVML samples)")
for line in kv_lines:
    print(f"vLLM: {line}")
print(f"accuracy: {accuracy}" if accuracy else "accuracy: none (lm_eval did not finish)")
for line in oom[:3]:
    print(f"OOM: {line}")
print(f"report: {report}")
EOF

EXIT=0
if grep -qi "out of memory" "$LOG"; then
  EXIT=1
elif [[ "$STATUS" -ne 0 ]]; then
  echo "repro: lm_eval failed with status $STATUS (see $LOG)" >&2
  EXIT=2
fi

if [[ "$CHECK_SCALING" -eq 1 ]]; then
  echo "repro: per-step memory against two num_gpu_blocks_override values"
  set +e
  CUDA_VISIBLE_DEVICES="$GPU_UUID" VLLM_USE_V1=1 VLLM_ATTENTION_BACKEND="$BACKEND" \
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
    "$PYTHON" -m harness.eval.vllm_probe compare --model "$MODEL" >"$OUT/scaling.json"
  SCALING=$?
  set -e
  cat "$OUT/scaling.json"
  if [[ "$SCALING" -ne 0 && "$EXIT" -eq 0 ]]; then
    EXIT=1
  fi
fi
exit "$EXIT"
