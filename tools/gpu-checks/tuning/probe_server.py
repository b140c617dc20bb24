"""Can a session forked by an RPC server use CUDA? tvm.rpc.Server on localhost with different init callbacks;
per server one session: device 0 exists, and (with a flush registered) one flush runs there."""
import tirbench.tuning.rpc.server  # noqa: F401,I001  (sets the environment before tvm is imported)
import time

from tvm import rpc

from tirbench.bench import harness
from tirbench.tuning import runners as measure


def build_in_process():
    measure.register()
    harness.l2_flush_executable()


for name, callback in [("no callback", None), ("register only", measure.register),
                       ("flush built in the listening process", build_in_process),
                       ("prepare_server (flush exported by a subprocess)", measure.prepare_server)]:
    t = time.perf_counter()
    server = rpc.Server("127.0.0.1", 9300, 9399, silent=True, server_init_callback=callback)
    try:
        sess = rpc.connect("127.0.0.1", server.port, session_timeout=60)
        exist = sess.cuda(0).exist
        msg = f"cuda(0).exist={exist}"
        if exist and callback is not None:
            a = sess.cuda(0)
            x = __import__("tvm").runtime.tensor(__import__("numpy").ones(4, "float32"), a)
            t1 = time.perf_counter()
            sess.get_function(measure.FLUSH_FUNC)(x)
            msg += f", one flush in the session OK ({time.perf_counter() - t1:.2f} s incl. first load/build)"
    except Exception as e:  # noqa: BLE001
        msg = "FAIL " + (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
    print(f"{name}: {msg}  [{time.perf_counter() - t:.1f} s]", flush=True)
    server.terminate()
