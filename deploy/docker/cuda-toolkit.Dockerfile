# CUDA bases made from a CUDA toolkit installed on the build host, for where
# NVIDIA's images (docker.io/nvidia/cuda) cannot be pulled. The toolkit's
# folder (/usr/local/cuda) is the build context; build-images.sh builds both
# targets when CUDA_TOOLKIT names one and passes them to the Dockerfile as
# CUDA_DEVEL_IMAGE and CUDA_RUNTIME_IMAGE.
#   devel    the toolkit's headers, which the CUDA backend is built against
#   runtime  Debian 12 with NVRTC, its built-ins and cuBLASLt (the libraries
#            the backend dlopens; the driver comes from the host)
# Only the versioned library files are copied: COPY follows symlinks, so the
# unversioned names would be second copies of 100-500 MB files.
ARG DEBIAN_IMAGE=docker.io/library/debian:12

FROM ${DEBIAN_IMAGE} AS devel
COPY include /usr/local/cuda/include

FROM ${DEBIAN_IMAGE} AS runtime
COPY lib64/libnvrtc.so.[0-9]* lib64/libnvrtc-builtins.so.[0-9]* lib64/libcublasLt.so.[0-9]* \
     /usr/local/cuda/lib64/
# NVRTC loads its built-ins by soname: the loader must find them.
RUN echo /usr/local/cuda/lib64 > /etc/ld.so.conf.d/cuda.conf && ldconfig
