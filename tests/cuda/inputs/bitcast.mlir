// out0[i] = the float32 whose bits are 2^23 * (bits[i] + 127): 2^bits[i] (arith.bitcast,
// an LLVM bitcast on the GPU, a NumPy view in the simulator); one thread per element.
"builtin.module"() ({
  "func.func"() <{sym_name = "pow2", function_type = (memref<8xi32>, memref<8xf32>) -> ()}> ({
  ^bb0(%bits: memref<8xi32>, %out0: memref<8xf32>):
    %c1 = "arith.constant"() <{value = 1 : index}> : () -> index
    %c8 = "arith.constant"() <{value = 8 : index}> : () -> index
    "gpu.launch_func"(%c1, %c1, %c1, %c8, %c1, %c1, %bits, %out0) <{kernel = @m::@k, operandSegmentSizes = array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 0>}> : (index, index, index, index, index, index, memref<8xi32>, memref<8xf32>) -> ()
    "func.return"() : () -> ()
  }) {tess.num_outputs = 1 : i64} : () -> ()
  "gpu.module"() <{sym_name = "m"}> ({
    "gpu.func"() <{function_type = (memref<8xi32>, memref<8xf32>) -> ()}> ({
    ^bb0(%bits: memref<8xi32>, %out0: memref<8xf32>):
      %bias = arith.constant 127 : i32
      %shift = arith.constant 23 : i32
      %i = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
      %e = memref.load %bits[%i] : memref<8xi32>
      %b = arith.addi %e, %bias : i32
      %s = arith.shli %b, %shift : i32
      %f = arith.bitcast %s : i32 to f32
      memref.store %f, %out0[%i] : memref<8xf32>
      "gpu.return"() : () -> ()
    }) {gpu.kernel, sym_name = "k"} : () -> ()
  }) : () -> ()
}) {gpu.container_module} : () -> ()
