// tess-fuse-epilogue on the linalg-on-tensors IR that tess-to-linalg produces (written here
// by hand in that form), after tess-fuse as in the cpu pipeline: a reduction or matmul and
// the ops after it that need only its finished rows become one kernel.group, which
// tess-bufferize, tess-outline-kernels and tess-linalg-to-loops carry down to ONE kernel
// whose one scf.parallel over rows runs every nest of the group in order.
// RUN: tessc-opt %s -p tess-fuse,tess-fuse-epilogue | filecheck %s
// RUN: tessc-opt %s -p 'tess-fuse,tess-fuse-epilogue{report=true}' | filecheck %s --check-prefix=REPORT
// RUN: tessc-opt %s -p 'tess-fuse,tess-fuse-epilogue{chain-reductions=false report=true}' | filecheck %s --check-prefix=NOCHAIN
// RUN: tessc-opt %s -p tess-fuse,tess-fuse-epilogue,tess-bufferize | filecheck %s --check-prefix=BUFFERS
// RUN: tessc-opt %s -p 'tess-fuse,tess-fuse-epilogue{in-place=false},tess-bufferize' | filecheck %s --check-prefix=COPY
// RUN: tessc-opt %s -p tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels | filecheck %s --check-prefix=KERNELS
// RUN: tessc-opt %s -p tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops | filecheck %s --check-prefix=LOOPS
// RUN: tessc-opt %s -p tess-fuse,tess-fuse-epilogue | tessc-opt --print-op-generic | tessc-opt | filecheck %s
// RUN: tessc-opt %s -p tess-fuse,tess-fuse-epilogue | filecheck %s --check-prefix=QUIET

// Without `report`, the pass leaves no attributes of its own.
// QUIET: builtin.module
// QUIET-NOT: tess.grouped
// QUIET-NOT: tess.shared_loops
// QUIET-NOT: tess.group_refused
// QUIET-NOT: tess.in_place

// matmul + bias + relu: the init (a fill), the matmul and the fused bias+relu are one group
// that yields the relu's result. The relu reads the matmul's result only at the element it
// writes, and nothing else reads it: the relu takes it as its `outs` and overwrites it
// (`in-place`), so that, bufferized, all three write the out-param.
// CHECK-LABEL: func.func @dense_relu(
// CHECK-NEXT:    %out = kernel.group -> (tensor<4x16xf32>) {
// CHECK-NEXT:      %e0 = tensor.empty() : tensor<4x16xf32>
// CHECK-NEXT:      %zero = linalg.generic {{.*}} outs(%e0 : tensor<4x16xf32>)
// CHECK:           %mm = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : {{.*}}) outs(%zero : tensor<4x16xf32>)
// CHECK:           %[[RELU:.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], {{.*}} ins(%b : tensor<16xf32>) outs(%mm : tensor<4x16xf32>)
// CHECK-NEXT:      ^bb0(%bb: f32, %[[ACC:.+]]: f32):
// CHECK-NEXT:        arith.addf %[[ACC]], %bb
// CHECK-NEXT:        arith.constant
// CHECK-NEXT:        arith.maximumf
// CHECK:           kernel.yield %[[RELU]] : tensor<4x16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %out : tensor<4x16xf32>
// REPORT-LABEL: func.func @dense_relu(
// REPORT:         kernel.group -> (tensor<4x16xf32>) attributes {tess.grouped = ["linalg.fill", "tess.matmul", "tess.relu"], tess.shared_loops = 1 : i64, tess.in_place = ["tess.relu"]} {
// NOCHAIN-LABEL: func.func @dense_relu(
// NOCHAIN:         kernel.group -> (tensor<4x16xf32>) attributes {tess.grouped = ["linalg.fill", "tess.matmul", "tess.relu"], tess.shared_loops = 1 : i64, tess.in_place = ["tess.relu"]} {

// On buffers, the group has no results and allocates nothing here: all three write the
// out-param. Without `in-place`, the matmul's result is an intermediate buffer (a full
// one), allocated before the group.
// BUFFERS-LABEL: func.func @dense_relu(
// BUFFERS-NEXT:    kernel.group {
// BUFFERS-NEXT:      linalg.generic {{.*}} outs(%out0 : memref<4x16xf32>)
// BUFFERS:           linalg.generic {{.*}} ins(%x, %w : {{.*}}) outs(%out0 : memref<4x16xf32>)
// BUFFERS:           linalg.generic {{.*}} ins(%b : {{.*}}) outs(%out0 : memref<4x16xf32>)
// BUFFERS:       {{^    [}]$}}
// BUFFERS-NEXT:    func.return
// COPY-LABEL: func.func @dense_relu(
// COPY-NEXT:    %[[C:.+]] = memref.alloc() : memref<4x16xf32>
// COPY-NEXT:    kernel.group {
// COPY-NEXT:      linalg.generic {{.*}} outs(%[[C]] : memref<4x16xf32>)
// COPY:           linalg.generic {{.*}} ins(%x, %w : {{.*}}) outs(%[[C]] : memref<4x16xf32>)
// COPY:           linalg.generic {{.*}} ins(%[[C]], %b : {{.*}}) outs(%out0 : memref<4x16xf32>)
// COPY:       {{^    [}]$}}
// COPY-NEXT:    func.return

// One kernel for the whole group.
// KERNELS-LABEL: func.func @dense_relu(
// KERNELS-NEXT:    func.call @dense_relu_kernel_0(%out0, %x, %w, %b)
// KERNELS-NEXT:    func.return
// KERNELS:       func.func private @dense_relu_kernel_0({{.*}}) attributes {tess.kernel} {
// KERNELS-NEXT:    linalg.generic
// KERNELS:         linalg.generic {{.*}} ins(%x, %w
// KERNELS:         linalg.generic {{.*}} ins(%b
// KERNELS:         func.return
// KERNELS-NOT:   dense_relu_kernel_1

// One scf.parallel over rows i: the fill of row i, then the matmul's k-j nest for row i,
// then the epilogue of row i, which reads only row i of the matmul's result.
// LOOPS-LABEL: func.func private @dense_relu_kernel_0(
// LOOPS:         "scf.parallel"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
// LOOPS-NEXT:    ^{{.*}}(%[[I:.+]]: index):
// LOOPS-NEXT:      scf.for %[[J0:.+]] = {{.*}} {
// LOOPS:             memref.store %c0, %out0[%[[I]], %[[J0]]]
// LOOPS:           scf.for %[[K:.+]] = {{.*}} {
// LOOPS-NEXT:        scf.for %[[J1:.+]] = {{.*}} {
// LOOPS-NEXT:          %l = memref.load %x[%[[I]], %[[K]]]
// LOOPS-NEXT:          %r = memref.load %w[%[[K]], %[[J1]]]
// LOOPS-NEXT:          %acc = memref.load %out0[%[[I]], %[[J1]]]
// LOOPS:               memref.store %s, %out0[%[[I]], %[[J1]]]
// LOOPS:           scf.for %[[J2:.+]] = {{.*}} {
// LOOPS-NEXT:        %bb = memref.load %b[%[[J2]]]
// LOOPS-NEXT:        %o = memref.load %out0[%[[I]], %[[J2]]]
// LOOPS:             arith.maximumf
// LOOPS-NEXT:        memref.store %{{.*}}, %out0[%[[I]], %[[J2]]]
// LOOPS-NEXT:      }
// LOOPS-NEXT:      scf.reduce
// LOOPS-NEXT:    })
// LOOPS-NEXT:    func.return
func.func @dense_relu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %e0 = tensor.empty() : tensor<4x16xf32>
  %zero = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%e0 : tensor<4x16xf32>) {
  ^bb0(%o: f32):
    %c0 = arith.constant 0.000000e+00 : f32
    linalg.yield %c0 : f32
  } -> tensor<4x16xf32>
  %mm = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%zero : tensor<4x16xf32>) attrs =  {tess.op = "tess.matmul"} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %p = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %e1 = tensor.empty() : tensor<4x16xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%mm, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%e1 : tensor<4x16xf32>) attrs =  {tess.op = "tess.add"} {
  ^bb0(%m: f32, %bb: f32, %o: f32):
    %s = arith.addf %m, %bb : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %e2 = tensor.empty() : tensor<4x16xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%biased : tensor<4x16xf32>) outs(%e2 : tensor<4x16xf32>) attrs =  {tess.op = "tess.relu"} {
  ^bb0(%v: f32, %o: f32):
    %c0 = arith.constant 0.000000e+00 : f32
    %r = arith.maximumf %v, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  func.return %out : tensor<4x16xf32>
}

// Softmax over rows: the row max, x - max and exp (fused by tess-fuse), the row sum and the
// division all read row i of what came before: one group with both reductions, and their
// inits, sharing the row loop.
// CHECK-LABEL: func.func @softmax(
// CHECK-NEXT:    %probs = kernel.group -> (tensor<4x8xf32>) {
// CHECK:           %max = linalg.generic
// CHECK:           %exp = linalg.generic {{.*}} ins(%x, %max
// CHECK:           %sum = linalg.generic {{.*}} ins(%exp
// CHECK:           %[[P:.+]] = linalg.generic {{.*}} ins(%exp, %sum
// CHECK:           kernel.yield %[[P]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %probs
// REPORT-LABEL: func.func @softmax(
// REPORT:         tess.grouped = ["linalg.fill", "tess.reduce_max", "tess.exp", "linalg.fill", "tess.sum", "tess.div"], tess.shared_loops = 1 : i64

// With chain-reductions=false the row sum starts a group of its own.
// NOCHAIN-LABEL: func.func @softmax(
// NOCHAIN:         tess.grouped = ["linalg.fill", "tess.reduce_max", "tess.exp"]
// NOCHAIN:         tess.grouped = ["linalg.fill", "tess.sum", "tess.div"]
// NOCHAIN:         tess.group_refused = "not grouped with tess.reduce_max: a further reduction (chain-reductions=false)"

// KERNELS-LABEL: func.func @softmax(
// KERNELS:         func.call @softmax_kernel_0(
// KERNELS-NOT:     func.call
// KERNELS:         func.return

// LOOPS-LABEL: func.func private @softmax_kernel_0(
// LOOPS:         "scf.parallel"
// LOOPS:           math.exp
// LOOPS:           arith.divf
// LOOPS:           scf.reduce
// LOOPS-NEXT:    })
// LOOPS-NEXT:    func.return
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4x1xf32>
  %ninf = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%e0 : tensor<4x1xf32>) {
  ^bb0(%o: f32):
    %c = arith.constant 0xFF800000 : f32
    linalg.yield %c : f32
  } -> tensor<4x1xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%ninf : tensor<4x1xf32>) attrs =  {tess.op = "tess.reduce_max"} {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.maximumf %acc, %v : f32
    linalg.yield %m : f32
  } -> tensor<4x1xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %shifted = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x8xf32>, tensor<4x1xf32>) outs(%e1 : tensor<4x8xf32>) attrs =  {tess.op = "tess.sub"} {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%shifted : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) attrs =  {tess.op = "tess.exp"} {
  ^bb0(%v: f32, %o: f32):
    %ev = math.exp %v : f32
    linalg.yield %ev : f32
  } -> tensor<4x8xf32>
  %e3 = tensor.empty() : tensor<4x1xf32>
  %zero = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%e3 : tensor<4x1xf32>) {
  ^bb0(%o: f32):
    %c = arith.constant 0.000000e+00 : f32
    linalg.yield %c : f32
  } -> tensor<4x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%exp : tensor<4x8xf32>) outs(%zero : tensor<4x1xf32>) attrs =  {tess.op = "tess.sum"} {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x1xf32>
  %e4 = tensor.empty() : tensor<4x8xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%exp, %sum : tensor<4x8xf32>, tensor<4x1xf32>) outs(%e4 : tensor<4x8xf32>) attrs =  {tess.op = "tess.div"} {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %q = arith.divf %v, %s : f32
    linalg.yield %q : f32
  } -> tensor<4x8xf32>
  func.return %probs : tensor<4x8xf32>
}

// An epilogue that reads the matmul's result transposed needs other rows of it: refused.
// The matmul still takes its init.
// CHECK-LABEL: func.func @transposed(
// CHECK-NEXT:    %mm = kernel.group -> (tensor<4x4xf32>) {
// CHECK:           kernel.yield
// CHECK-NEXT:    }
// CHECK:         %out = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, {{.*}} ins(%mm : tensor<4x4xf32>)
// REPORT-LABEL: func.func @transposed(
// REPORT:         tess.grouped = ["linalg.fill", "tess.matmul"]
// REPORT:         tess.group_refused = "not grouped with tess.matmul: it shares 0 of the group's 1 outer parallel loops (it reads or writes group results at other rows, or its loops differ)"
// KERNELS-LABEL: func.func @transposed(
// KERNELS-NEXT:    memref.alloc
// KERNELS-NEXT:    func.call @transposed_kernel_0(
// KERNELS-NEXT:    func.call @transposed_kernel_1(
// KERNELS-NEXT:    func.return
func.func @transposed(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %e0 = tensor.empty() : tensor<4x4xf32>
  %zero = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%e0 : tensor<4x4xf32>) {
  ^bb0(%o: f32):
    %c0 = arith.constant 0.000000e+00 : f32
    linalg.yield %c0 : f32
  } -> tensor<4x4xf32>
  %mm = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%zero : tensor<4x4xf32>) attrs =  {tess.op = "tess.matmul"} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %p = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %e1 = tensor.empty() : tensor<4x4xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%mm : tensor<4x4xf32>) outs(%e1 : tensor<4x4xf32>) attrs =  {tess.op = "tess.permute"} {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<4x4xf32>) outs(%e2 : tensor<4x4xf32>) attrs =  {tess.op = "tess.relu"} {
  ^bb0(%v: f32, %o: f32):
    %c0 = arith.constant 0.000000e+00 : f32
    %r = arith.maximumf %v, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  func.return %out : tensor<4x4xf32>
}

// A full reduction has no rows to share: it groups with its init and a scalar epilogue,
// one serial kernel instead of three.
// CHECK-LABEL: func.func @total(
// CHECK-NEXT:    %root = kernel.group -> (tensor<f32>) {
// CHECK:           %sum = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]
// CHECK:           math.sqrt
// REPORT-LABEL: func.func @total(
// REPORT:         tess.grouped = ["linalg.fill", "tess.sum", "tess.sqrt"], tess.shared_loops = 0 : i64, tess.in_place = ["tess.sqrt"]
// LOOPS-LABEL: func.func private @total_kernel_0(
// LOOPS-NOT:     scf.parallel
// LOOPS:         math.sqrt
// LOOPS-NEXT:    memref.store
// LOOPS-NEXT:    func.return
func.func @total(%x: tensor<4x8xf32>) -> tensor<f32> {
  %e0 = tensor.empty() : tensor<f32>
  %zero = linalg.generic {indexing_maps = [affine_map<() -> ()>], iterator_types = []} outs(%e0 : tensor<f32>) {
  ^bb0(%o: f32):
    %c0 = arith.constant 0.000000e+00 : f32
    linalg.yield %c0 : f32
  } -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%zero : tensor<f32>) attrs =  {tess.op = "tess.sum"} {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %e1 = tensor.empty() : tensor<f32>
  %root = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%sum : tensor<f32>) outs(%e1 : tensor<f32>) attrs =  {tess.op = "tess.sqrt"} {
  ^bb0(%v: f32, %o: f32):
    %r = math.sqrt %v : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  func.return %root : tensor<f32>
}
