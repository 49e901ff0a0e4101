// out0 = w - 0.5 * g, computed in w's buffer (a donated input: `tess.aliases_input = 0`);
// one thread per element, guarded (2 blocks of 32 threads for 37 elements).
"builtin.module"() ({
  "func.func"() <{sym_name = "step", function_type = (memref<37xf64>, memref<37xf64>, memref<37xf64>) -> (),
    arg_attrs = [{}, {}, {tess.aliases_input = 0 : i64}]}> ({
  ^bb0(%w: memref<37xf64>, %g: memref<37xf64>, %out0: memref<37xf64>):
    %c1 = "arith.constant"() <{value = 1 : index}> : () -> index
    %c32 = "arith.constant"() <{value = 32 : index}> : () -> index
    %c2 = "arith.constant"() <{value = 2 : index}> : () -> index
    "gpu.launch_func"(%c2, %c1, %c1, %c32, %c1, %c1, %out0, %w, %g) <{kernel = @m::@k, operandSegmentSizes = array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3, 0>}> : (index, index, index, index, index, index, memref<37xf64>, memref<37xf64>, memref<37xf64>) -> ()
    "func.return"() : () -> ()
  }) {tess.num_outputs = 1 : i64} : () -> ()
  "gpu.module"() <{sym_name = "m"}> ({
    "gpu.func"() <{function_type = (memref<37xf64>, memref<37xf64>, memref<37xf64>) -> ()}> ({
    ^bb0(%o: memref<37xf64>, %w: memref<37xf64>, %g: memref<37xf64>):
      %n = arith.constant 37 : index
      %half = arith.constant 0.5 : f64
      %i = "gpu.global_id"() <{dimension = #gpu<dim x>}> : () -> index
      %in = arith.cmpi ult, %i, %n : index
      scf.if %in {
        %a = memref.load %w[%i] : memref<37xf64>
        %b = memref.load %g[%i] : memref<37xf64>
        %c = arith.mulf %half, %b : f64
        %d = arith.subf %a, %c : f64
        memref.store %d, %o[%i] : memref<37xf64>
      }
      "gpu.return"() : () -> ()
    }) {gpu.kernel, sym_name = "k"} : () -> ()
  }) : () -> ()
}) {gpu.container_module} : () -> ()
