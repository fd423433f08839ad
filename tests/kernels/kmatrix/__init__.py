"""sockbuf kernel matrix: fetch Debian kernels, boot them under qemu, collect."""
