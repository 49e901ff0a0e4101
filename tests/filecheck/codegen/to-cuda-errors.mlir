// RUN: tessc-opt %s -t numba --split-input-file --verify-diagnostics

// Gpu-level IR the CUDA emitter cannot translate is a located diagnostic, not a traceback:
// here a host function reads device memory element by element.

"builtin.module"() ({
  "func.func"() <{sym_name = "f", function_type = (memref<4xf32>, memref<4xf32>) -> ()}> ({
  ^bb0(%x: memref<4xf32>, %out0: memref<4xf32>):
    %c0 = "arith.constant"() <{value = 0 : index}> : () -> index
    // expected-error @+1 {{cannot emit Numba code for 'memref.load': the host cannot access device memory element-wise}}
    %v = "memref.load"(%x, %c0) : (memref<4xf32>, index) -> f32
    "func.return"() : () -> ()
  }) {tess.num_outputs = 1 : i64} : () -> ()
  "gpu.module"() <{sym_name = "kernels"}> ({
  ^bb0:
  }) : () -> ()
}) {gpu.container_module} : () -> ()

// -----

// An argument without a NumPy dtype (i7) is located at its host function, as on the CPU.

"builtin.module"() ({
  // expected-error @+1 {{cannot emit Numba code for 'func.func': no NumPy dtype for type i7}}
  "func.func"() <{sym_name = "g", function_type = (memref<4xi7>) -> ()}> ({
  ^bb0(%out0: memref<4xi7>):
    "func.return"() : () -> ()
  }) {tess.num_outputs = 1 : i64} : () -> ()
  "gpu.module"() <{sym_name = "kernels"}> ({
  ^bb0:
  }) : () -> ()
}) {gpu.container_module} : () -> ()
