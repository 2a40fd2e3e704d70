// bench_kineto_json's ondemand walk compiled for -march=haswell (CMakeLists sets the flag).
#define FS_WALK_NAME walkOndemandHaswell
#define FS_WALK_NAME_STR ondemandHaswellName
#include "bench_kineto_json_ondemand.inc"
