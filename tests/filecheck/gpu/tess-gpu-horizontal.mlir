// tess-gpu-horizontal: launches that do not depend on each other (neither writes memory
// the other touches) run as ONE launch: grid x is their blocks one after the other, each
// block running its member's body under `scf.if` on the block index; a member of fewer
// threads and no barrier also guards on the thread index. A launch that depends on the one
// before runs after it in the same launch when both are one block: a barrier between.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-horizontal,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-contract,tess-gpu-map,tess-gpu-horizontal,canonicalize,cse' | filecheck %s

// Two independent matmuls (one 64 x 64 tile each, 256 threads) and a tanh over 50 elements
// (64 threads, 1 block): ONE launch of 3 blocks of 16 x 16 threads.
func.func @two(%a: tensor<40x30xf32>, %b: tensor<30x20xf32>, %c: tensor<40x30xf32>, %d: tensor<30x20xf32>, %x: tensor<50xf32>) -> (tensor<40x20xf32>, tensor<40x20xf32>, tensor<50xf32>) {
  %0 = tess.matmul %a, %b : tensor<40x30xf32>, tensor<30x20xf32> -> tensor<40x20xf32>
  %1 = tess.matmul %c, %d : tensor<40x30xf32>, tensor<30x20xf32> -> tensor<40x20xf32>
  %2 = tess.tanh %x : tensor<50xf32>
  func.return %0, %1, %2 : tensor<40x20xf32>, tensor<40x20xf32>, tensor<50xf32>
}
// CHECK-LABEL: func.func @two(
// CHECK-DAG:     %[[THREE:.+]] = arith.constant 3 : index
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[T16:.+]] = arith.constant 16 : index
// CHECK:         "gpu.launch_func"(%[[THREE]], %[[ONE]], %[[ONE]], %[[T16]], %[[T16]], %[[ONE]], %out0, %a, %b, %out1, %c, %d, %x, %out2) <{kernel = @kernels::@two_kernel_0_side_by_side,
// CHECK-NOT:     gpu.launch_func
// CHECK:         func.return

// The second matmul reads the first one's result, and each is 2 blocks (two 64-row tiles):
// two launches.
func.func @chain(%a: tensor<80x30xf32>, %b: tensor<30x20xf32>, %e: tensor<20x20xf32>) -> tensor<80x20xf32> {
  %0 = tess.matmul %a, %b : tensor<80x30xf32>, tensor<30x20xf32> -> tensor<80x20xf32>
  %1 = tess.matmul %0, %e : tensor<80x20xf32>, tensor<20x20xf32> -> tensor<80x20xf32>
  func.return %1 : tensor<80x20xf32>
}
// CHECK-LABEL: func.func @chain(
// CHECK:         "gpu.launch_func"({{.*}}) <{kernel = @kernels::@chain_kernel_0,
// CHECK-NEXT:    "gpu.launch_func"({{.*}}) <{kernel = @kernels::@chain_kernel_2,
// CHECK-NEXT:    func.return

// Two independent matmuls only: one launch, its kernel unsigned like theirs.
func.func @matmuls(%a: tensor<40x30xf32>, %b: tensor<30x20xf32>, %c: tensor<40x30xf32>, %d: tensor<30x20xf32>) -> (tensor<40x20xf32>, tensor<40x20xf32>) {
  %0 = tess.matmul %a, %b : tensor<40x30xf32>, tensor<30x20xf32> -> tensor<40x20xf32>
  %1 = tess.matmul %c, %d : tensor<40x30xf32>, tensor<30x20xf32> -> tensor<40x20xf32>
  func.return %0, %1 : tensor<40x20xf32>, tensor<40x20xf32>
}
// CHECK-LABEL: func.func @matmuls(
// CHECK:         "gpu.launch_func"({{.*}}) <{kernel = @kernels::@matmuls_kernel_0_side_by_side,
// CHECK-NEXT:    func.return

// (16,8) @ (8,10) @ (10,4): one block each, one launch: the second after a barrier.
func.func @small(%a: tensor<16x8xf32>, %b: tensor<8x10xf32>, %e: tensor<10x4xf32>) -> tensor<16x4xf32> {
  %0 = tess.matmul %a, %b : tensor<16x8xf32>, tensor<8x10xf32> -> tensor<16x10xf32>
  %1 = tess.matmul %0, %e : tensor<16x10xf32>, tensor<10x4xf32> -> tensor<16x4xf32>
  func.return %1 : tensor<16x4xf32>
}
// CHECK-LABEL: func.func @small(
// CHECK:         "gpu.launch_func"({{.*}}) <{kernel = @kernels::@small_kernel_0_side_by_side,
// CHECK-NEXT:    func.return

// The merged kernel: the members' tiles as they were, one after the other by block.
// CHECK:       known_block_size = array<i32: 16, 16, 1>, known_grid_size = array<i32: 3, 1, 1>
// CHECK:         %[[TX:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}>
// CHECK:         %[[PART:.+]] = arith.addi %[[TX]], %{{.+}} : index
// CHECK:         %[[LINEAR:.+]] = arith.addi %[[PART]], %{{.+}} : index
// CHECK:         %[[BX:.+]] = "gpu.block_id"() <{dimension = #gpu<dim x>}>
// CHECK:         %[[FIRST:.+]] = arith.cmpi ult, %[[BX]], %{{.+}} : index
// CHECK-NEXT:    scf.if %[[FIRST]] {
// CHECK:         "gpu.barrier"
// CHECK:         %[[FROM:.+]] = arith.cmpi uge, %[[BX]], %{{.+}} : index
// CHECK:         scf.if
// CHECK:         "gpu.barrier"
// The tanh: block 2, threads below 64.
// CHECK:         %[[AFTER:.+]] = arith.cmpi uge, %[[BX]], %{{.+}} : index
// CHECK:         %[[FEW:.+]] = arith.cmpi ult, %[[LINEAR]], %{{.+}} : index
// CHECK:         scf.if
// CHECK-NEXT:      scf.for %{{.+}} = %[[LINEAR]] to
// CHECK:           math.tanh
// The tanh's indices are non-negative too (ids, constants, sums, quotients): unsigned.
// CHECK:       sym_name = "two_kernel_0_side_by_side", gpu.kernel, workgroup_attributions = 4 : i64, tess.unsigned_indices} : () -> ()

// Every member's indices are non-negative (tess.unsigned_indices), so the merged kernel's are.
// CHECK:       sym_name = "matmuls_kernel_0_side_by_side", gpu.kernel, workgroup_attributions = 4 : i64, tess.unsigned_indices}

// One barrier in each matmul (one k tile each, double-buffered), and one between them.
// CHECK:       known_block_size = array<i32: 16, 16, 1>, known_grid_size = array<i32: 1, 1, 1>
// CHECK-COUNT-3: "gpu.barrier"
// CHECK-NOT:     "gpu.barrier"
// CHECK:       sym_name = "small_kernel_0_side_by_side", gpu.kernel, workgroup_attributions = 4 : i64, tess.unsigned_indices}
