# Included by this directory's CTestTestfile, after every other directory's: each test named
# in schedule.cmake is defined by then (a test a tree does not have is ignored by ctest;
# check_schedule.cmake finds a name that no longer matches).
include("${CMAKE_CURRENT_LIST_DIR}/schedule.cmake")
foreach(test IN LISTS sp_schedule_alone)
  set_tests_properties("${test}" PROPERTIES RUN_SERIAL TRUE)
endforeach()
foreach(entry IN LISTS sp_schedule_costs)
  string(FIND "${entry}" "|" bar REVERSE)
  string(SUBSTRING "${entry}" 0 ${bar} test)
  math(EXPR from "${bar} + 1")
  string(SUBSTRING "${entry}" ${from} -1 seconds)
  set_tests_properties("${test}" PROPERTIES COST ${seconds})
endforeach()
