// tess-linalg-to-loops: linalg ops on memrefs become loops. The leading parallel loops are
// one scf.parallel, the rest nested scf.for; the loop that indexes the output's last dim goes
// innermost when that keeps a parallel loop outside (matmul: i-k-j). Reductions load,
// combine and store into the output; constant-0 map results are index constants.
// RUN: tessc-opt %s -p tess-linalg-to-loops | filecheck %s

func.func private @broadcast_add(%a: memref<3x1xf32>, %b: memref<4xf32>, %out: memref<3x4xf32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %b : memref<3x1xf32>, memref<4xf32>) outs(%out : memref<3x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  func.return
}
// CHECK-LABEL: func.func private @broadcast_add(%a: memref<3x1xf32>, %b: memref<4xf32>, %out: memref<3x4xf32>) attributes {tess.kernel} {
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    "scf.parallel"(%[[C0]], %[[C0]], %[[C3]], %[[C4]], %[[C1]], %[[C1]]) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:      %x = memref.load %a[%[[I]], %[[C0]]] : memref<3x1xf32>
// CHECK-NEXT:      %y = memref.load %b[%[[J]]] : memref<4xf32>
// CHECK-NEXT:      %s = arith.addf %x, %y : f32
// CHECK-NEXT:      memref.store %s, %out[%[[I]], %[[J]]] : memref<3x4xf32>
// CHECK-NEXT:      scf.reduce
// CHECK-NEXT:    }) : (index, index, index, index, index, index) -> ()
// CHECK-NEXT:    func.return

// Batched matmul (b, i, j, k): parallel over (b, i), then k, then j innermost.
func.func private @matmul(%a: memref<2x3x4xf32>, %b: memref<4x5xf32>, %out: memref<2x3x5xf32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : memref<2x3x4xf32>, memref<4x5xf32>) outs(%out : memref<2x3x5xf32>) {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %p = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  func.return
}
// CHECK-LABEL: func.func private @matmul(
// CHECK:         "scf.parallel"({{.*}}) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
// CHECK-NEXT:    ^{{.*}}(%[[B:.*]]: index, %[[I:.*]]: index):
// CHECK-NEXT:      scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:          %l = memref.load %a[%[[B]], %[[I]], %[[K]]] : memref<2x3x4xf32>
// CHECK-NEXT:          %r = memref.load %b[%[[K]], %[[J]]] : memref<4x5xf32>
// CHECK-NEXT:          %acc = memref.load %out[%[[B]], %[[I]], %[[J]]] : memref<2x3x5xf32>
// CHECK-NEXT:          %p = arith.mulf %l, %r : f32
// CHECK-NEXT:          %s = arith.addf %acc, %p : f32
// CHECK-NEXT:          memref.store %s, %out[%[[B]], %[[I]], %[[J]]] : memref<2x3x5xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.reduce

// keepdim: the reduced dim of the output is the constant 0; the kept dims stay in order.
func.func private @sum_keepdim(%a: memref<2x3x4xf32>, %out: memref<2x1x4xf32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, 0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%a : memref<2x3x4xf32>) outs(%out : memref<2x1x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  }
  func.return
}
// CHECK-LABEL: func.func private @sum_keepdim(
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK:         "scf.parallel"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:      scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:          %x = memref.load %a[%[[I]], %[[R]], %[[K]]] : memref<2x3x4xf32>
// CHECK-NEXT:          %acc = memref.load %out[%[[I]], %[[C0]], %[[K]]] : memref<2x1x4xf32>
// CHECK-NEXT:          %s = arith.addf %acc, %x : f32
// CHECK-NEXT:          memref.store %s, %out[%[[I]], %[[C0]], %[[K]]] : memref<2x1x4xf32>

// A row reduction keeps its one parallel loop outermost, the reduction inside.
func.func private @row_max(%a: memref<3x4xf64>, %out: memref<3xf64>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%a : memref<3x4xf64>) outs(%out : memref<3xf64>) {
  ^bb0(%x: f64, %acc: f64):
    %m = arith.maximumf %acc, %x : f64
    linalg.yield %m : f64
  }
  func.return
}
// CHECK-LABEL: func.func private @row_max(
// CHECK:         "scf.parallel"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:      scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        %x = memref.load %a[%[[I]], %[[J]]] : memref<3x4xf64>
// CHECK-NEXT:        %acc = memref.load %out[%[[I]]] : memref<3xf64>
// CHECK-NEXT:        %m = arith.maximumf %acc, %x : f64
// CHECK-NEXT:        memref.store %m, %out[%[[I]]] : memref<3xf64>

// A transposed write: the loop indexing the output's last dim (d0) goes last.
func.func private @transpose_write(%a: memref<3x4xf32>, %out: memref<4x3xf32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1, d0)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<3x4xf32>) outs(%out : memref<4x3xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  func.return
}
// CHECK-LABEL: func.func private @transpose_write(
// CHECK:         "scf.parallel"({{.*}}) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
// CHECK-NEXT:    ^{{.*}}(%[[D1:.*]]: index, %[[D0:.*]]: index):
// CHECK-NEXT:      %x = memref.load %a[%[[D0]], %[[D1]]] : memref<3x4xf32>
// CHECK-NEXT:      memref.store %x, %out[%[[D1]], %[[D0]]] : memref<4x3xf32>

// Rank 0: no loops at all.
func.func private @rank0(%a: memref<f32>, %out: memref<f32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%a : memref<f32>) outs(%out : memref<f32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  }
  func.return
}
// CHECK-LABEL: func.func private @rank0(%a: memref<f32>, %out: memref<f32>) attributes {tess.kernel} {
// CHECK-NEXT:    %x = memref.load %a[] : memref<f32>
// CHECK-NEXT:    %n = arith.negf %x : f32
// CHECK-NEXT:    memref.store %n, %out[] : memref<f32>
// CHECK-NEXT:    func.return

// Named ops lower through their maps too (a scalar input is used directly), and
// linalg.index becomes the induction variable. The two nests of this kernel write
// different buffers over the same space, so they share one scf.parallel (step 4).
func.func private @fill_and_index(%out: memref<2x3xf32>, %idx: memref<2x3xf32>) attributes {tess.kernel} {
  %c = arith.constant 1.500000e+00 : f32
  linalg.fill ins(%c : f32) outs(%out : memref<2x3xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%idx : memref<2x3xf32>) {
  ^bb0(%o: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i32
    %jf = arith.sitofp %ji : i32 to f32
    linalg.yield %jf : f32
  }
  func.return
}
// CHECK-LABEL: func.func private @fill_and_index(
// CHECK-NEXT:    %c = arith.constant 1.500000e+00 : f32
// CHECK:         ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:      memref.store %c, %out[%[[I]], %[[J]]] : memref<2x3xf32>
// CHECK-NEXT:      %ji = arith.index_cast %[[J]] : index to i32
// CHECK-NOT:     linalg.
// CHECK-NOT:     affine.

// A scatter (take's adjoint, `out[r, j] += idx[p] == r ? g[p, j] : 0` as tess-to-linalg
// writes it) is one pass over the indices: no loop over the rows r; each index p adds its
// row of g into the row it names, if it names one (here the index is not clamped). Its
// zero fill stays a nest of its own (not shared).
// Along dim 1 of a 3-D result, the dim before it is parallel (disjoint writes).
func.func private @scatter_rows(%g: memref<5x3xf32>, %idx: memref<5xi64>, %out: memref<7x3xf32>) attributes {tess.kernel} {
  %zero = arith.constant 0.000000e+00 : f32
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%out : memref<7x3xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %idx : memref<5x3xf32>, memref<5xi64>) outs(%out : memref<7x3xf32>) {
  ^bb0(%v: f32, %i: i64, %acc: f32):
    %p = arith.index_cast %i : i64 to index
    %r = linalg.index 0 : index
    %hit = arith.cmpi eq, %p, %r : index
    %z = arith.constant 0.000000e+00 : f32
    %taken = arith.select %hit, %v, %z : f32
    %sum = arith.addf %acc, %taken : f32
    linalg.yield %sum : f32
  }
  func.return
}
// CHECK-LABEL: func.func private @scatter_rows
// CHECK:         "scf.parallel"
// CHECK:           memref.store %zero, %out[%i0, %i1] : memref<7x3xf32>
// CHECK:         scf.for %[[P:.*]] = %{{.*}} to %[[C5:.*]] step
// CHECK-NEXT:      scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:        %[[V:.*]] = memref.load %g[%[[P]], %[[J]]] : memref<5x3xf32>
// CHECK-NEXT:        %[[I:.*]] = memref.load %idx[%[[P]]] : memref<5xi64>
// CHECK-NEXT:        %[[R:.*]] = arith.index_cast %[[I]] : i64 to index
// CHECK-NEXT:        %[[LO:.*]] = arith.cmpi sge, %[[R]], %{{.*}} : index
// CHECK-NEXT:        %[[HI:.*]] = arith.cmpi slt, %[[R]], %[[C7:.*]] : index
// CHECK-NEXT:        %[[IN:.*]] = arith.andi %[[LO]], %[[HI]] : i1
// CHECK-NEXT:        scf.if %[[IN]] {
// CHECK-NEXT:          %[[A:.*]] = memref.load %out[%[[R]], %[[J]]] : memref<7x3xf32>
// CHECK-NEXT:          %[[S:.*]] = arith.addf %[[A]], %[[V]] : f32
// CHECK-NEXT:          memref.store %[[S]], %out[%[[R]], %[[J]]] : memref<7x3xf32>
// CHECK-NOT:     linalg.index
// CHECK-NOT:     arith.cmpi

func.func private @scatter_middle(%g: memref<2x4x3xf32>, %idx: memref<4xi32>, %out: memref<2x6x3xf32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%g, %idx : memref<2x4x3xf32>, memref<4xi32>) outs(%out : memref<2x6x3xf32>) {
  ^bb0(%v: f32, %i: i32, %acc: f32):
    %p = arith.index_cast %i : i32 to index
    %r = linalg.index 1 : index
    %hit = arith.cmpi eq, %r, %p : index
    %z = arith.constant 0.000000e+00 : f32
    %taken = arith.select %hit, %v, %z : f32
    %sum = arith.addf %taken, %acc : f32
    linalg.yield %sum : f32
  }
  func.return
}
// CHECK-LABEL: func.func private @scatter_middle
// CHECK:         "scf.parallel"(%{{.*}}, %[[C2:.*]], %{{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
// CHECK-NEXT:    ^bb0(%[[B:.*]]: index):
// CHECK-NEXT:      scf.for %[[P:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:        scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:          memref.load %g[%[[B]], %[[P]], %[[J]]] : memref<2x4x3xf32>
// CHECK-NEXT:          memref.load %idx[%[[P]]] : memref<4xi32>
// CHECK-NEXT:          %[[R:.*]] = arith.index_cast
// CHECK:                 scf.if
// CHECK-NEXT:              memref.load %out[%[[B]], %[[R]], %[[J]]] : memref<2x6x3xf32>
// CHECK-NEXT:              arith.addf
// CHECK-NEXT:              memref.store %{{.*}}, %out[%[[B]], %[[R]], %[[J]]] : memref<2x6x3xf32>
