"""MetaSchedule design spaces built from the hand kernels of several families, above them all: the ``wgmma`` space
(``wgmma_space``: v8 on the fp16 GEMM and the NHWC convolution, or the warp-specialized kernel as a sampled pipeline)
and the warp-specialized kernels it can draw (``ws_kernels``). ``tuning.spaces`` registers them for the tuner."""
