// tess-memory-plan: intermediates of a host live in one byte arena (a trailing
// `tess.workspace` argument, or an aligned memref.alloc with workspace-arg=false), each a
// memref.view at a 64-byte-aligned offset; buffers whose live intervals [first use, last
// use] are disjoint, or that an elementwise op updates in place, share bytes. Donated
// inputs back out-params (`tess.aliases_input`); intermediates live in argument arrays
// when those are free. The host records its byte counts.
// RUN: tessc-opt %s -p tess-memory-plan | filecheck %s
// RUN: tessc-opt %s -p 'tess-memory-plan{workspace-arg=false}' | filecheck %s --check-prefix=ALLOC
// RUN: tessc-opt %s -p 'tess-memory-plan{report=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=REPORT
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-bufferize,tess-outline-kernels,tess-memory-plan' | filecheck %s --check-prefix=SEED
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-bufferize,tess-outline-kernels,tess-memory-plan' | filecheck %s --check-prefix=UNFUSED

func.func private @k(memref<16xf32>, memref<16xf32>)
func.func private @k2(memref<16xf32>, memref<16xf32>, memref<16xf32>)
func.func private @kr(memref<16xf32>, memref<4x4xf32>)
func.func private @k8(memref<8x8xf32>, memref<4x4xf32>)
func.func private @sgd_kernel(%w: memref<4x8xf32>, %g: memref<4x8xf32>, %o: memref<4x8xf32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w, %g : memref<4x8xf32>, memref<4x8xf32>) outs(%o : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %d = arith.subf %x, %y : f32
    linalg.yield %d : f32
  }
  func.return
}
func.func private @transpose_kernel(%u: memref<8x8xf32>, %o: memref<8x8xf32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%u : memref<8x8xf32>) outs(%o : memref<8x8xf32>) {
  ^bb0(%x: f32, %z: f32):
    linalg.yield %x : f32
  }
  func.return
}
func.func private @neg_kernel(%x: memref<16xf32>, %o: memref<16xf32>) attributes {tess.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : memref<16xf32>) outs(%o : memref<16xf32>) {
  ^bb0(%a: f32, %b: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  func.return
}

// %0 dies at the second call, where %1 is born; %2 is born after %0 died: it takes %0's
// bytes, and %1 (live with both) the next aligned slot.
func.func @disjoint(%a: memref<16xf32>, %out0: memref<4x4xf32>) attributes {tess.num_outputs = 1 : i64} {
  %0 = memref.alloc() : memref<16xf32>
  func.call @k(%a, %0) : (memref<16xf32>, memref<16xf32>) -> ()
  %1 = memref.alloc() : memref<16xf32>
  func.call @k(%0, %1) : (memref<16xf32>, memref<16xf32>) -> ()
  %2 = memref.alloc() : memref<16xf32>
  func.call @k(%1, %2) : (memref<16xf32>, memref<16xf32>) -> ()
  func.call @kr(%2, %out0) : (memref<16xf32>, memref<4x4xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @disjoint(%a: memref<16xf32>, %out0: memref<4x4xf32>, %workspace: memref<128xi8> {tess.workspace})
// CHECK-SAME:    tess.workspace_bytes = 128 : i64, tess.peak_bytes = 192 : i64, tess.arena_bytes = 128 : i64, tess.unplanned_bytes = 256 : i64, tess.live_peak_bytes = 192 : i64, tess.input_bytes = 64 : i64, tess.output_bytes = 64 : i64, tess.aliased_bytes = 0 : i64
// CHECK-NEXT:    %[[OFF0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[B0:.*]] = memref.view %workspace[%[[OFF0]]][] : memref<128xi8> to memref<16xf32>
// CHECK-NEXT:    func.call @k(%a, %[[B0]])
// CHECK-NEXT:    %[[OFF1:.*]] = arith.constant 64 : index
// CHECK-NEXT:    %[[B1:.*]] = memref.view %workspace[%[[OFF1]]][] : memref<128xi8> to memref<16xf32>
// CHECK-NEXT:    func.call @k(%[[B0]], %[[B1]])
// CHECK-NEXT:    %[[OFF2:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[B2:.*]] = memref.view %workspace[%[[OFF2]]][] : memref<128xi8> to memref<16xf32>
// CHECK-NEXT:    func.call @k(%[[B1]], %[[B2]])
// CHECK-NEXT:    func.call @kr(%[[B2]], %out0)
// CHECK-NEXT:    func.return
// ALLOC-LABEL: func.func @disjoint(%a: memref<16xf32>, %out0: memref<4x4xf32>)
// ALLOC-NOT:     tess.workspace
// ALLOC-SAME:    tess.peak_bytes = 192 : i64, tess.arena_bytes = 128 : i64
// ALLOC-NEXT:    %arena = memref.alloc() {alignment = 64 : i64} : memref<128xi8>
// ALLOC:         memref.view %arena[%{{.*}}][] : memref<128xi8> to memref<16xf32>
// REPORT-LABEL: tess-memory-plan @disjoint: workspace_bytes 128, peak_bytes 192, arena_bytes 128, unplanned_bytes 256, live_peak_bytes 192, input_bytes 64, output_bytes 64, aliased_bytes 0
// REPORT-NEXT:    buffer  type            bytes  interval  offset
// REPORT-NEXT:    #0      memref<16xf32>  64     [1, 3]    0
// REPORT-NEXT:    #1      memref<16xf32>  64     [3, 5]    64
// REPORT-NEXT:    #2      memref<16xf32>  64     [5, 6]    0

// An elementwise kernel that reads %x at the index it writes %y, as %x's last use,
// updates in place: %y takes %x's offset. A transposing one does not.
func.func @in_place(%a: memref<16xf32>, %out0: memref<4x4xf32>) attributes {tess.num_outputs = 1 : i64} {
  %x = memref.alloc() : memref<16xf32>
  func.call @k(%a, %x) : (memref<16xf32>, memref<16xf32>) -> ()
  %y = memref.alloc() : memref<16xf32>
  func.call @neg_kernel(%x, %y) : (memref<16xf32>, memref<16xf32>) -> ()
  func.call @kr(%y, %out0) : (memref<16xf32>, memref<4x4xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @in_place(
// CHECK-SAME:    %workspace: memref<64xi8> {tess.workspace}
// CHECK-SAME:    tess.peak_bytes = 128 : i64, tess.arena_bytes = 64 : i64, tess.unplanned_bytes = 192 : i64, tess.live_peak_bytes = 128 : i64
// CHECK-NEXT:    %[[X:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %x = memref.view %workspace[%[[X]]][] : memref<64xi8> to memref<16xf32>
// CHECK-NEXT:    func.call @k(%a, %x)
// CHECK-NEXT:    %[[Y:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %y = memref.view %workspace[%[[Y]]][] : memref<64xi8> to memref<16xf32>
// CHECK-NEXT:    func.call @neg_kernel(%x, %y)
func.func @not_in_place(%a: memref<8x8xf32>, %out0: memref<4x4xf32>) attributes {tess.num_outputs = 1 : i64} {
  %x = memref.alloc() : memref<8x8xf32>
  func.call @transpose_kernel(%a, %x) : (memref<8x8xf32>, memref<8x8xf32>) -> ()
  %y = memref.alloc() : memref<8x8xf32>
  func.call @transpose_kernel(%x, %y) : (memref<8x8xf32>, memref<8x8xf32>) -> ()
  func.call @k8(%y, %out0) : (memref<8x8xf32>, memref<4x4xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @not_in_place(
// CHECK-SAME:    %workspace: memref<512xi8> {tess.workspace}
// CHECK-NEXT:    arith.constant 0 : index
// CHECK:         arith.constant 256 : index

// Out-params are scratch space until they are first written: %x (dead before %out0 is
// written) lives in %out0; %y, read where %out0 is written, does not.
func.func @scratch(%a: memref<16xf32>, %out0: memref<16xf32>) attributes {tess.num_outputs = 1 : i64} {
  %x = memref.alloc() : memref<16xf32>
  func.call @k(%a, %x) : (memref<16xf32>, memref<16xf32>) -> ()
  %y = memref.alloc() : memref<16xf32>
  func.call @k(%x, %y) : (memref<16xf32>, memref<16xf32>) -> ()
  func.call @k(%y, %out0) : (memref<16xf32>, memref<16xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @scratch(%a: memref<16xf32>, %out0: memref<16xf32>, %workspace: memref<64xi8> {tess.workspace})
// CHECK-SAME:    tess.peak_bytes = 128 : i64, tess.arena_bytes = 64 : i64, tess.unplanned_bytes = 192 : i64
// CHECK-NEXT:    func.call @k(%a, %out0)
// CHECK-NEXT:    %[[OFF:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %y = memref.view %workspace[%[[OFF]]][] : memref<64xi8> to memref<16xf32>
// CHECK-NEXT:    func.call @k(%out0, %y)
// CHECK-NEXT:    func.call @k(%y, %out0)
// REPORT-LABEL: tess-memory-plan @scratch:
// REPORT-NEXT:    buffer  type            bytes  interval  offset
// REPORT-NEXT:    x       memref<16xf32>  64     [1, 3]    argument 1
// REPORT-NEXT:    y       memref<16xf32>  64     [3, 4]    0

// All three are live at the middle call: no sharing. Largest first: the 64-byte buffer
// at 0, then the 12-byte ones at the next 64-byte boundaries; the arena ends at the last
// buffer's end, not at a boundary. A view of a buffer extends its life to the view's uses.
func.func @overlapping(%a: memref<16xf32>, %out0: memref<16xf32>) attributes {tess.num_outputs = 1 : i64} {
  %small = memref.alloc() : memref<3xf32>
  %big = memref.alloc() : memref<4x4xf32>
  %flat = memref.collapse_shape %big [[0, 1]] : memref<4x4xf32> into memref<16xf32>
  %other = memref.alloc() : memref<3xf32>
  "memref.copy"(%small, %other) : (memref<3xf32>, memref<3xf32>) -> ()
  func.call @k2(%a, %flat, %out0) : (memref<16xf32>, memref<16xf32>, memref<16xf32>) -> ()
  "memref.copy"(%other, %small) : (memref<3xf32>, memref<3xf32>) -> ()
  func.call @k(%flat, %out0) : (memref<16xf32>, memref<16xf32>) -> ()
  memref.dealloc %big : memref<4x4xf32>
  func.return
}
// CHECK-LABEL: func.func @overlapping(
// CHECK-SAME:    %workspace: memref<140xi8> {tess.workspace}
// CHECK-SAME:    tess.peak_bytes = 204 : i64, tess.arena_bytes = 140 : i64, tess.unplanned_bytes = 152 : i64, tess.live_peak_bytes = 152 : i64
// CHECK:         %small = memref.view %workspace[%{{.*}}][] : memref<140xi8> to memref<3xf32>
// CHECK:         %big = memref.view %workspace[%{{.*}}][] : memref<140xi8> to memref<4x4xf32>
// CHECK-NEXT:    %flat = memref.collapse_shape %big
// CHECK:         %other = memref.view %workspace[%{{.*}}][] : memref<140xi8> to memref<3xf32>
// CHECK-NOT:     memref.dealloc
// CHECK:         func.return
// REPORT-LABEL: tess-memory-plan @overlapping:
// REPORT-NEXT:    buffer  type             bytes  interval  offset
// REPORT-NEXT:    small   memref<3xf32>    12     [4, 6]    64
// REPORT-NEXT:    big     memref<4x4xf32>  64     [5, 7]    0
// REPORT-NEXT:    other   memref<3xf32>    12     [4, 6]    128

// A host calling a planned host passes it a slice of its own arena, live at the call.
func.func @caller(%a: memref<16xf32>, %out0: memref<4x4xf32>) attributes {tess.num_outputs = 1 : i64} {
  func.call @disjoint(%a, %out0) : (memref<16xf32>, memref<4x4xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @caller(%a: memref<16xf32>, %out0: memref<4x4xf32>, %workspace: memref<128xi8> {tess.workspace})
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %disjoint_workspace = memref.view %workspace[%[[C0]]][] : memref<128xi8> to memref<128xi8>
// CHECK-NEXT:    func.call @disjoint(%a, %out0, %disjoint_workspace) : (memref<16xf32>, memref<4x4xf32>, memref<128xi8>) -> ()

// Donation: @step's first out-param is written by a kernel that reads the donated %w at
// the index it writes, and %w is not read afterwards: it aliases %w. The second out-param
// is a copy of the donated %v: it aliases %v and the copy goes. %g is not donated; the
// third out-param's writer reads %u through a transposing map: no alias.
func.func @step(%w: memref<4x8xf32> {tess.donated}, %g: memref<4x8xf32>, %v: memref<4x8xf32> {tess.donated}, %u: memref<8x8xf32> {tess.donated}, %out0: memref<4x8xf32>, %out1: memref<4x8xf32>, %out2: memref<8x8xf32>) attributes {tess.num_outputs = 3 : i64} {
  func.call @sgd_kernel(%w, %g, %out0) : (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) -> ()
  "memref.copy"(%v, %out1) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
  func.call @transpose_kernel(%u, %out2) : (memref<8x8xf32>, memref<8x8xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @step(%w: memref<4x8xf32> {tess.donated}, %g: memref<4x8xf32>, %v: memref<4x8xf32> {tess.donated}, %u: memref<8x8xf32> {tess.donated}, %out0: memref<4x8xf32> {tess.aliases_input = 0 : i64}, %out1: memref<4x8xf32> {tess.aliases_input = 2 : i64}, %out2: memref<8x8xf32>)
// CHECK-SAME:    tess.peak_bytes = 256 : i64, tess.arena_bytes = 0 : i64, tess.unplanned_bytes = 512 : i64
// CHECK-SAME:    tess.output_bytes = 512 : i64, tess.aliased_bytes = 256 : i64
// CHECK-NEXT:    func.call @sgd_kernel(%w, %g, %out0)
// CHECK-NEXT:    func.call @transpose_kernel(%u, %out2)
// CHECK-NEXT:    func.return
// REPORT-LABEL: tess-memory-plan @step:
// REPORT-NEXT:    out-param 4 aliases donated input 0
// REPORT-NEXT:    out-param 5 aliases donated input 2

// A donated input read after the out-param's (elementwise) writer cannot back it; once
// dead, it can hold an intermediate of its type (the alloc is replaced by the input).
func.func @late_read(%w: memref<16xf32> {tess.donated}, %out0: memref<16xf32>, %out1: memref<4x4xf32>) attributes {tess.num_outputs = 2 : i64} {
  func.call @neg_kernel(%w, %out0) : (memref<16xf32>, memref<16xf32>) -> ()
  %t = memref.alloc() : memref<16xf32>
  func.call @k(%w, %t) : (memref<16xf32>, memref<16xf32>) -> ()
  %s = memref.alloc() : memref<16xf32>
  func.call @k(%t, %s) : (memref<16xf32>, memref<16xf32>) -> ()
  func.call @kr(%s, %out1) : (memref<16xf32>, memref<4x4xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @late_read(%w: memref<16xf32> {tess.donated}, %out0: memref<16xf32>, %out1: memref<4x4xf32>, %workspace: memref<64xi8> {tess.workspace})
// CHECK-SAME:    tess.peak_bytes = 192 : i64, tess.arena_bytes = 64 : i64, tess.unplanned_bytes = 256 : i64
// CHECK-SAME:    tess.aliased_bytes = 0 : i64
// CHECK-NEXT:    func.call @neg_kernel(%w, %out0)
// CHECK-NEXT:    %[[OFF:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %t = memref.view %workspace[%[[OFF]]][] : memref<64xi8> to memref<16xf32>
// CHECK-NEXT:    func.call @k(%w, %t)
// CHECK-NEXT:    func.call @k(%t, %w)
// CHECK-NEXT:    func.call @kr(%w, %out1)
// REPORT-LABEL: tess-memory-plan @late_read:
// REPORT-NEXT:    buffer  type            bytes  interval  offset
// REPORT-NEXT:    t       memref<16xf32>  64     [2, 4]    0
// REPORT-NEXT:    s       memref<16xf32>  64     [4, 5]    argument 0

// The seed: (3,5,1) * (1,5,4), then sum over dim 1. Fused, the (3,5,4) product is never
// stored: the peak is the (3,4) output, 48 bytes. Unfused, the product is an intermediate.
func.func @seed(%a: tensor<3x5x1xf32>, %b: tensor<1x5x4xf32>) -> tensor<3x4xf32> {
  %z = tess.mul %a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32> -> tensor<3x5x4xf32>
  %s = tess.sum %z dims = [1] : tensor<3x5x4xf32> -> tensor<3x4xf32>
  func.return %s : tensor<3x4xf32>
}
// SEED-LABEL: func.func @seed(%a: memref<3x5x1xf32>, %b: memref<1x5x4xf32>, %out0: memref<3x4xf32>)
// SEED-SAME:    tess.peak_bytes = 48 : i64, tess.arena_bytes = 0 : i64, tess.unplanned_bytes = 48 : i64
// SEED-NOT:     memref<3x5x4xf32>
// SEED:         func.return
// UNFUSED-LABEL: func.func @seed(%a: memref<3x5x1xf32>, %b: memref<1x5x4xf32>, %out0: memref<3x4xf32>, %workspace: memref<240xi8> {tess.workspace})
// UNFUSED-SAME:    tess.peak_bytes = 288 : i64, tess.arena_bytes = 240 : i64
// UNFUSED:         memref.view %workspace[%{{.*}}][] : memref<240xi8> to memref<3x5x4xf32>
