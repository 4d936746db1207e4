#!/usr/bin/env bash
# Build the vLLM 0.34.0 + torch 2.14.0 bundle for the Hopper GPU host (python3.12, torch 2.11+cu130, no network),
# sm_90 kernels only, split into parts that each travel with one device command (64 MiB per command, the
# repository's ~5 MB included: 55 MiB parts).  Stages under /tmp/gpu-bundle; never inside the repository.
# usage: tests/gpu/build_bundle.sh   (needs python3.12, pip with PyPI, xz, split; ~25 min on 2 CPUs)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=/tmp/gpu-bundle
mkdir -p $B/dl $B/stage
cd $B/dl
P="--python-version 3.12 --only-binary=:all: --no-deps"
pip download $P --platform manylinux_2_28_x86_64 vllm==0.34.0 torch==2.14.0 "triton~=3.8.0"
# transformers imports torchvision when one is installed; the host's 0.26 (built for torch 2.11) fails to load
# against torch 2.14 after the memory profile, so the bundle ships the matching 0.29.0 (7 MB, CUDA 13).
pip download $P --platform manylinux_2_28_x86_64 torchvision==0.29.0
# torch 2.14 calls NCCL symbols (ncclCommGrow, ncclSignal, ncclWinGetUserPtr, ...) the host's NCCL 2.28.9
# (torch 2.11's pin) lacks: ship torch's own pin.  Its CUDA 13.0.2 libraries (cu13, cudnn 9.19, cusparselt
# 0.8.0, nvshmem 3.4.5) have the sonames torch 2.14 links and are used from the host.
pip download $P --platform manylinux_2_18_x86_64 nvidia-nccl-cu13==2.30.7
[ -d $B/venv ] || python3.12 -m venv $B/venv
# shellcheck disable=SC1091
source $B/venv/bin/activate
pip install -q pyelftools
# A CPU venv shaped like the host, for the import check (tests/gpu/import_check.py) and the dependency tree.
pip install -q $B/dl/torch-2.14.0-*.whl $B/dl/triton-3.8.0-*.whl
pip install -q --no-deps $B/dl/vllm-0.34.0-*.whl
# vLLM 0.34 needs huggingface_hub >= 2, which the host's transformers 5.17 refuses: ship transformers 5.22.
pip install -q "pydantic>=2.12" cbor2 pyzmq msgspec pybase64 cachetools blake3 setproctitle "openai>=2.25" \
  "oss-harmony>=0.0.11" "fastapi<0.137,>=0.133" "starlette>=1.0.1" partial-json-parser "llguidance<1.8,>=1.7" \
  xgrammar==0.2.8 apache-tvm-ffi==0.1.11 depyf==0.20.0 compressed-tensors==0.17.0 loguru regex psutil sentencepiece \
  py-cpuinfo protobuf prometheus_client pillow tiktoken lark==1.2.2 jsonschema einops cloudpickle watchfiles \
  python-json-logger ijson "aiohttp>=3.14.4" orjson prometheus-fastapi-instrumentator uvicorn uvloop gguf
pip install -q "transformers>=5.16.1,<5.23" "huggingface_hub>=2.0"
# vllm.v1.attention.backends.mla.flashattn_mla fails on CPU only, and its exit code would end the build here
(cd /tmp && python "$HERE/import_check.py") || echo "import check: the FAIL lines above (flashattn_mla: CPU only)"

cd $B/stage
unzip -q -o ../dl/torch-2.14.0-*.whl 'torch/*'
unzip -q -o ../dl/triton-3.8.0-*.whl 'triton/*'
unzip -q -o ../dl/vllm-0.34.0-*.whl 'vllm/*'
unzip -q -o ../dl/nvidia_nccl_cu13-2.30.7-*.whl 'nvidia/*'
unzip -q -o ../dl/torchvision-0.29.0-*.whl 'torchvision/*' 'torchvision.libs/*' 'torchvision-0.29.0.dist-info/*'
# What Hopper never loads: FA2, the Rust frontend, headers, protoc, triton's CUPTI and Blackwell ptxas.
rm -rf vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so vllm/vllm-rs torch/include torch/bin/protoc* \
  triton/backends/nvidia/lib/cupti triton/backends/nvidia/lib/cupti-blackwell triton/backends/nvidia/bin/ptxas-blackwell
python "$HERE/prune_fatbin.py" torch/lib/libtorch_cuda.so torch/lib/libtorch_cuda_linalg.so torch/lib/libtorch_nvshmem.so \
  nvidia/nccl/lib/libnccl.so.2 vllm/*.so vllm/vllm_flash_attn/*.so

rm -rf $B/site && mkdir $B/site
SP=$B/venv/lib/python3.12/site-packages
for e in "$SP"/*; do
  case "$(basename "$e")" in
    nvidia | torch | triton | vllm | sympy* | numpy* | cuda | cuda_* | networkx* | mpmath* | pip* | setuptools* | \
      _distutils_hack | distutils-precedence.pth | elftools | pyelftools* | __pycache__ | nvidia_*) ;;
    *) cp -r "$e" $B/site/ ;;
  esac
done
cp -r "$SP"/nvidia_nccl_cu13-*.dist-info $B/site/
cp -r torch triton vllm torchvision torchvision.libs torchvision-0.29.0.dist-info $B/site/
mkdir -p $B/site/nvidia && cp -r nvidia/nccl $B/site/nvidia/
find $B/site -name __pycache__ -type d -prune -exec rm -rf {} +
rm -rf $B/parts55 && mkdir $B/parts55
tar -C $B/site -cf - . | xz -6 -T0 -c | split -b 55m -d -a 2 - $B/parts55/b.
ls -l $B/parts55
# vLLM 0.34 imports the CuTe DSL on every CUDA start (kernel warm-up of its MiniMax-M3 kernels): its pin,
# nvidia-cutlass-dsl[cu13] 4.8.0 and quack-kernels 0.6.5, ship as parts c.* (cuda-bindings comes from the host).
rm -rf $B/cutlass $B/cutsite $B/cparts && mkdir -p $B/cutlass $B/cutsite $B/cparts
pip download $P --platform manylinux_2_28_x86_64 -d $B/cutlass nvidia-cutlass-dsl==4.8.0 \
  nvidia-cutlass-dsl-libs-base==4.8.0 nvidia-cutlass-dsl-libs-core==4.8.0 nvidia-cutlass-dsl-libs-cu13==4.8.0 \
  quack-kernels==0.6.5
for w in $B/cutlass/*.whl; do unzip -q -o "$w" -d $B/cutsite; done
tar -C $B/cutsite -cf - . | xz -6 -T0 -c | split -b 40m -d -a 2 - $B/cparts/c.
ls -l $B/cparts
