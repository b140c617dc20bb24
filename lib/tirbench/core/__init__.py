"""The ground floor: the GPU description (``gpu``), machine and targets, the TIR pipeline and build/export, generated
CUDA, paths, errors, atomic writes, progress bars. Imports nothing else of tirbench."""
