"""A Relax model compiled with the suite's conv rules: each ``relax.nn.conv2d`` the rules take becomes a call of the
kernel they choose for it, the bias, shortcut and ReLU after it fused into its store (``dispatch``, ``epilogue``),
the rest goes through TVM's default GPU pipeline (``pipeline``)."""
