#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (CPU) from source, unless it is built already, for `speculab demo --engine
# llamacpp` and tests/integration/test_llamacpp_demo.py. The source is the llama.cpp tree vendored in PyPI's
# llama-cpp-python sdist (pinned below), so pip is the only download; it lands outside the clone:
#   DIR=${SPECULAB_LLAMACPP_DIR:-$HOME/.cache/speculab/llama.cpp}
#   $DIR/bin/llama-server          the server (static: no shared libraries to find)
#   $DIR/convert/                  convert_hf_to_gguf.py with its conversion/ and gguf-py/ (scripts/demo_gguf.py)
#   $DIR/VERSION                   the llama-cpp-python version it was built from
#   $DIR/demo/{target,draft}.gguf  the shipped demo pair converted by scripts/demo_gguf.py (with $PYTHON, default
#                                  python3: it needs torch, transformers and sentencepiece, i.e. speculab's
#                                  [engine,llamacpp] extras); re-converted when the pair changes
# Cost on a 2-core machine: the sdist download (76 MB) a few seconds; the build of the one target about 12 minutes
# when the machine is quiet (issue 16), 28.5 minutes measured on one shared with other jobs (14.6 CPU-minutes);
# the GGUF conversion 15-60 s. Left on disk: bin 15 MB, convert 2 MB, demo 15 MB, the sdist 74 MB (the build tree
# is removed).
# Build flags: no tests, examples, web UI download or HTTPS (the harness needs none of them); CPU only.
set -euo pipefail
VERSION=0.3.36
DIR="${SPECULAB_LLAMACPP_DIR:-$HOME/.cache/speculab/llama.cpp}"
JOBS="${SPECULAB_BUILD_JOBS:-$(nproc)}"
PYTHON="${PYTHON:-python3}"
here="$(cd "$(dirname "$0")" && pwd)"
convert_demo() {
    if ! "$PYTHON" -c "import torch, transformers, sentencepiece, safetensors" 2>/dev/null; then
        echo "the GGUF converter needs torch, transformers and sentencepiece: pip install -e '.[engine,llamacpp]'" >&2
        exit 2
    fi
    t0=$(date +%s)
    "$PYTHON" "$here/demo_gguf.py" --llamacpp-dir "$DIR"
    echo "demo pair as GGUF in $(($(date +%s) - t0)) s"
}
if [ -x "$DIR/bin/llama-server" ] && [ "$(cat "$DIR/VERSION" 2>/dev/null)" = "$VERSION" ] \
    && "$DIR/bin/llama-server" --version >/dev/null 2>&1 && [ -f "$DIR/convert/convert_hf_to_gguf.py" ]; then
    echo "llama-server present: $DIR/bin/llama-server (llama-cpp-python $VERSION)"
    convert_demo
    exit 0
fi
start=$(date +%s)
echo "building llama-server from llama-cpp-python $VERSION into $DIR (about 12 minutes on 2 cores)"
mkdir -p "$DIR/sdist"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# pip reuses a sdist already in the destination directory.
python3 -m pip download -q --no-deps --no-binary :all: -d "$DIR/sdist" "llama-cpp-python==$VERSION"
work="$DIR/work"
rm -rf "$work" && mkdir -p "$work"
tar -xzf "$DIR/sdist/llama_cpp_python-$VERSION.tar.gz" -C "$work"
src="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DGGML_CUDA=OFF >"$work/configure.log" 2>&1 || { tail -40 "$work/configure.log"; exit 1; }
built=$(date +%s)
cmake --build "$work/build" --target llama-server -j "$JOBS" >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log"; exit 1; }
echo "built in $(($(date +%s) - built)) s"
mkdir -p "$DIR/bin"
install -m 755 "$work/build/bin/llama-server" "$DIR/bin/llama-server"
rm -rf "$DIR/convert" && mkdir -p "$DIR/convert"
cp -r "$src/convert_hf_to_gguf.py" "$src/conversion" "$src/gguf-py" "$DIR/convert/"
echo "$VERSION" >"$DIR/VERSION"
rm -rf "$work"
"$DIR/bin/llama-server" --version 2>&1 | head -2
echo "llama-server ready: $DIR/bin/llama-server ($(($(date +%s) - start)) s in all)"
convert_demo
