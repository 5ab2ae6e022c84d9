// Prints the control protocol's operations, one "NAME RIGHTS" line each, from the table the
// server and poold dispatch by (<sandpool/control/control_ops.hpp>): what docs_match_code.sh holds
// docs/protocol.md's table of operations against.
#include <iostream>

#include <sandpool/control/control_ops.hpp>

int main() {
  for (const sandpool::ops::OpInfo& op : sandpool::ops::kOps) {
    std::cout << op.name << " " << to_string(op.rights) << "\n";
  }
  return 0;
}
