# usage: source tests/gpu/host_setup.sh  (on the GPU host, after every part has arrived in /tmp/parts)
# Extracts the torch 2.14 + triton 3.8 + NCCL 2.30.7 + vLLM 0.34.0 bundle once into /tmp/site and links the
# host's own CUDA 13 libraries (nvidia/cu13, cudnn, cusparselt, nvshmem, the torch 2.11 wheels) next to it,
# so the RPATH of the shipped torch ($ORIGIN/../../nvidia/*/lib) finds them.
HOST_SP=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(os.path.dirname(u.find_spec('torch').origin)))")
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_LOGGING_LEVEL=DEBUG \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false VLLM_USE_FLASHINFER_SAMPLER=0
if [ ! -f /tmp/site/.ok ]; then
  mkdir -p /tmp/site
  t=$(date +%s)
  cat /tmp/parts/b.* | python3 -c "import sys,tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site', filter='fully_trusted')" && touch /tmp/site/.ok
  echo "extracted in $(( $(date +%s)-t ))s"
  for d in "$HOST_SP"/nvidia/*/; do
    n=$(basename "$d")
    [ -e "/tmp/site/nvidia/$n" ] || ln -s "$d" "/tmp/site/nvidia/$n"
  done
fi
# vLLM 0.34's kernel warm-up imports its MiniMax-M3 kernels on every CUDA start, and they import the CuTe DSL
# (nvidia-cutlass-dsl[cu13] 4.8.0, vLLM's pin): its own parts c.*, whose .pth a PYTHONPATH folder never runs.
if ls /tmp/parts/c.* >/dev/null 2>&1 && [ ! -f /tmp/site/.cutlass-ok ]; then
  cat /tmp/parts/c.* | python3 -c "import sys,tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site', filter='fully_trusted')" && touch /tmp/site/.cutlass-ok
fi
[ -d /tmp/site/nvidia_cutlass_dsl/dsl_packages ] && export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
ls /tmp/site/nvidia
