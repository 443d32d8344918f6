#!/bin/sh
# The GPU evidence no CPU can give, for one lent device call (see the device
# tool's METHOD.md: one prepared script, each part under its own timeout, so
# one stall costs only its part). Results go to OUT as logs, CSVs and PNGs,
# packed into OUT/gpu_evidence.tar.gz (a device call returns few files).
#
#   sh bench/gpu_evidence.sh OUT PART...   PART: env peers-gpt2 peers-llama
#       peers-resnet50 compile-gpt2 offload bench quick
#   PY (default python3), SRC (folder holding python/ and bench/, default .)
set -u
OUT=$1; shift
PY=${PY:-python3}
SRC=${SRC:-.}
DEV=${DEV:-cuda}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$SRC/python${PYTHONPATH:+:$PYTHONPATH}"
export REMAT_LIB=${REMAT_LIB:-$PWD/build/libremat.so} REMAT_CLI=${REMAT_CLI:-$PWD/build/remat}

part() {  # name seconds command...
    name=$1 secs=$2; shift 2
    echo "== $name $(date +%T) (at most ${secs}s)"
    t0=$(date +%s)
    timeout -k 10 "$secs" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    echo "rc $rc after $(( $(date +%s) - t0 ))s: $name"
    tail -n 4 "$OUT/$name.log"
}

peers() {  # model seconds methods [more args]
    m=$1 secs=$2 meth=$3; shift 3
    part "peers-$m" "$secs" $PY "$SRC/bench/torch_peers.py" --device "$DEV" --models "$m" \
        --methods "$meth" --out "$OUT/peers" "$@"
}

for p in "$@"; do
    case $p in
    env) part env 20 sh -c "nvidia-smi -L; $PY -c 'import torch, transformers, sys;
print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__,
      torch.cuda.get_device_name() if torch.cuda.is_available() else \"no cuda\")'" ;;
    quick) peers gpt2 300 plain,hf-gc,ckpt-seq,sac,remat --quick ;;
    peers-gpt2) peers gpt2 180 plain,hf-gc,ckpt-seq,sac,remat --rounds 3 ;;
    peers-llama) peers llama 130 plain,hf-gc,ckpt-seq,sac,remat --rounds 3 ;;
    peers-resnet50) peers resnet50 100 plain,hf-gc,ckpt-seq,sac,remat --rounds 3 ;;
    compile-gpt2) part compile-gpt2 170 $PY "$SRC/bench/torch_peers.py" --device "$DEV" \
        --models gpt2 --methods plain,compile --budgets 0.0,0.5 --rounds 3 \
        --out "$OUT/compile" ;;
    offload) part offload 120 $PY "$SRC/bench/offload_bench.py" --device "$DEV" \
        --models gpt2,resnet50 --fractions 0.3,0.5 --runs 3 --csv "$OUT/offload.csv" ;;
    bench) part bench 150 $PY "$SRC/bench/torch_bench.py" --device "$DEV" \
        --models gpt2,resnet101 --limits 4 --runs 3 --out "$OUT/bench" ;;
    *) echo "gpu_evidence.sh: unknown part $p"; exit 2 ;;
    esac
done
tar -C "$OUT" -czf "$OUT/../gpu_evidence.tar.gz" --exclude gpu_evidence.tar.gz . 2>/dev/null &&
    mv "$OUT/../gpu_evidence.tar.gz" "$OUT/"
echo "== done $(date +%T)"
