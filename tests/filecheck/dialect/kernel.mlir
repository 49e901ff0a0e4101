// The kernel dialect: kernel.group on tensors (results, explicit kernel.yield) and on
// memrefs (no results, implicit terminator) parses, prints and verifies in its custom form,
// and the generic form round-trips to the same custom form. Verifier errors at the end.
// RUN: tessc-opt %s | filecheck %s
// RUN: tessc-opt %s --print-op-generic | tessc-opt | filecheck %s
// RUN: tessc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

#id = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @on_tensors(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT:    %r, %r_1 = kernel.group -> (tensor<4xf32>, tensor<4xf32>) attributes {tess.grouped = ["tess.neg"]} {
// CHECK-NEXT:      %e = tensor.empty() : tensor<4xf32>
// CHECK-NEXT:      %n = linalg.generic
// CHECK:           kernel.yield %n, %x : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r, %r_1 : tensor<4xf32>, tensor<4xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "on_tensors"
// GENERIC:         %r, %r_1 = "kernel.group"() ({
// GENERIC:           "kernel.yield"(%n, %x) : (tensor<4xf32>, tensor<4xf32>) -> ()
// GENERIC-NEXT:    }) {tess.grouped = ["tess.neg"]} : () -> (tensor<4xf32>, tensor<4xf32>)
func.func @on_tensors(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = kernel.group -> (tensor<4xf32>, tensor<4xf32>) attributes {tess.grouped = ["tess.neg"]} {
    %e = tensor.empty() : tensor<4xf32>
    %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.negf %a : f32
      linalg.yield %v : f32
    } -> tensor<4xf32>
    kernel.yield %n, %x : tensor<4xf32>, tensor<4xf32>
  }
  func.return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}

// On memrefs the terminator yields nothing and is left out of the custom form.
// CHECK-LABEL: func.func @on_memrefs(%x: memref<4xf32>, %t: memref<4xf32>, %out: memref<4xf32>) {
// CHECK-NEXT:    kernel.group {
// CHECK-NEXT:      %c = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      linalg.fill ins(%c : f32) outs(%t : memref<4xf32>)
// CHECK-NEXT:      linalg.generic
// CHECK:             linalg.yield %v : f32
// CHECK-NEXT:      {{^      [}]$}}
// CHECK-NEXT:    {{^    [}]$}}
// CHECK-NEXT:    func.return
// GENERIC-LABEL: "func.func"() <{sym_name = "on_memrefs"
// GENERIC:         "kernel.group"() ({
// GENERIC:           "kernel.yield"() : () -> ()
// GENERIC-NEXT:    }) : () -> ()
func.func @on_memrefs(%x: memref<4xf32>, %t: memref<4xf32>, %out: memref<4xf32>) {
  kernel.group {
    %c = arith.constant 2.0 : f32
    linalg.fill ins(%c : f32) outs(%t : memref<4xf32>)
    linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%x, %t : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %v = arith.mulf %a, %b : f32
      linalg.yield %v : f32
    }
  }
  func.return
}

// An empty group is a group with an implicit terminator.
// CHECK-LABEL: func.func @empty() {
// CHECK-NEXT:    kernel.group {
// CHECK-NEXT:    {{^    [}]$}}
func.func @empty() {
  kernel.group {
  }
  func.return
}
