# Sourced by the run 21/22 plans on the GPU machine: Triton 3.9.0 unpacked in /tmp/t39site (h200_run18_triton39.sh
# install) ahead of the image's 3.6.0, our wheels in /tmp/site, and sm90 compiled by Triton 3.9.0's bundled legacy
# ptxas (run 20: `prepare` drops ptxas-blackwell; the process-memory data are of kernels compiled so).
t39() {
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/t39site:/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  export TRITON_PTXAS_BLACKWELL_PATH=/tmp/t39site/triton/backends/nvidia/bin/ptxas
  python3 -c "import triton; assert triton.__version__ == '3.9.0', triton.__version__" || exit 1
}
