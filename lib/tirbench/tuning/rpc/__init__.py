"""RPC tuning over several GPUs: a tracker, one server per GPU, the cluster that starts and stops them."""
