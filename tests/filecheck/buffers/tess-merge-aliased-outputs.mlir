// tess-merge-aliased-outputs: a host's uses of an out-param carrying tess.aliases_input = k
// become uses of input k (the runtime passes that array as the out-param), so the kernel
// tess-outline-kernels makes of an in-place update takes the buffer once and its loads and
// stores name one array (LLVM vectorises them without a runtime overlap check). The
// out-params stay in the signature; one without the attribute, or whose donor has another
// type, keeps its uses.
// RUN: tessc-opt %s -p tess-merge-aliased-outputs | filecheck %s
// RUN: tessc-opt %s -p tess-merge-aliased-outputs,tess-outline-kernels | filecheck %s --check-prefix=KERNEL

#id = affine_map<(d0) -> (d0)>
func.func @momentum(%p: memref<8xf32> {tess.donated}, %g: memref<8xf32>, %b: memref<8xf32> {tess.donated}, %s: memref<4xf32> {tess.donated}, %out0: memref<8xf32> {tess.aliases_input = 0 : i64}, %out1: memref<8xf32> {tess.aliases_input = 2 : i64}, %out2: memref<8xf32>, %out3: memref<8xf32> {tess.aliases_input = 3 : i64}) attributes {tess.num_outputs = 4 : i64} {
  %lr = arith.constant 1.000000e-02 : f32
  %mu = arith.constant 9.000000e-01 : f32
  linalg.generic {indexing_maps = [#id, #id, #id, #id, #id], iterator_types = ["parallel"]} ins(%b, %g, %p : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%out1, %out0 : memref<8xf32>, memref<8xf32>) {
  ^bb0(%bv: f32, %gv: f32, %pv: f32, %o1: f32, %o0: f32):
    %m = arith.mulf %mu, %bv : f32
    %nb = arith.addf %m, %gv : f32
    %step = arith.mulf %lr, %nb : f32
    %np = arith.subf %pv, %step : f32
    linalg.yield %nb, %np : f32, f32
  }
  "memref.copy"(%g, %out2) : (memref<8xf32>, memref<8xf32>) -> ()
  "memref.copy"(%g, %out3) : (memref<8xf32>, memref<8xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @momentum(%p: memref<8xf32> {tess.donated}, %g: memref<8xf32>, %b: memref<8xf32> {tess.donated}, %s: memref<4xf32> {tess.donated}, %out0: memref<8xf32> {tess.aliases_input = 0 : i64}, %out1: memref<8xf32> {tess.aliases_input = 2 : i64}, %out2: memref<8xf32>, %out3: memref<8xf32> {tess.aliases_input = 3 : i64})
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%b, %g, %p : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%b, %p : memref<8xf32>, memref<8xf32>)
// CHECK:         "memref.copy"(%g, %out2)
// CHECK-NEXT:    "memref.copy"(%g, %out3)

// KERNEL-LABEL: func.func @momentum(
// KERNEL:         func.call @momentum_kernel_0(%b, %g, %p) : (memref<8xf32>, memref<8xf32>, memref<8xf32>) -> ()
// KERNEL:       func.func private @momentum_kernel_0(%b: memref<8xf32>, %g: memref<8xf32>, %p: memref<8xf32>) attributes {tess.kernel}
// KERNEL:         outs(%b, %p : memref<8xf32>, memref<8xf32>)
