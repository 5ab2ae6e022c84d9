// Prints the control protocol's operations, one "NAME RIGHTS" line each, from the table the
// server and poold dispatch by (<sandpool/control/control_ops.hpp>): what docs_match_code.sh holds
// docs/protocol.md's table of operations against. With --submit-args: the wire names of
// submit's arguments, one a line, from the one list the JSON mapping reads
// (ops::submit_arg_names()): what the Python client's submit_args() is held against. With
// --batch-task-args: those a batch's task reads (ops::batch_task_arg_names()), what the Python
// client's Job is held against.
#include <iostream>
#include <string_view>

#include <sandpool/control/control_ops.hpp>
#include <sandpool/control/ops/tasks.hpp>

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--submit-args") {
    for (std::string_view name : sandpool::ops::submit_arg_names()) std::cout << name << "\n";
    return 0;
  }
  if (argc == 2 && std::string_view(argv[1]) == "--batch-task-args") {
    for (std::string_view name : sandpool::ops::batch_task_arg_names()) std::cout << name << "\n";
    return 0;
  }
  if (argc != 1) {
    std::cerr << "usage: control_op_names [--submit-args | --batch-task-args]\n";
    return 2;
  }
  for (const sandpool::ops::OpInfo& op : sandpool::ops::kOps) {
    std::cout << op.name << " " << to_string(op.rights) << "\n";
  }
  return 0;
}
