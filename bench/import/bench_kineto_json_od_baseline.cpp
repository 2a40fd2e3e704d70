// bench_kineto_json's ondemand walk compiled for the build's baseline target.
#define FS_WALK_NAME walkOndemandBaseline
#define FS_WALK_NAME_STR ondemandBaselineName
#include "bench_kineto_json_ondemand.inc"
