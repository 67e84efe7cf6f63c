"""Static analysis of compiled CUDA kernels (cubin, fatbin, PTX, .cu) without a GPU.

`estimator.sass.analyse.analyse_file(path, arch)` compiles or extracts the cubin for the arch's SM,
disassembles it once and returns per kernel: resources (registers, stack, spills, shared memory, launch
bounds, cluster dims), the tensor-core path, the loops with their instruction mix, the theoretical
occupancy and plain-words findings. `estimate sass FILE` (estimator/cli/sass.py) prints it;
`estimate MODEL --kernel-sass NODE=FILE` feeds it to the tile model.
"""
