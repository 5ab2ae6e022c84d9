/* A plugin without sp_plugin_handle: the loader must refuse it, naming the symbol. */
#include <sandpool/plugin.h>

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)host;
  (void)config_json;
  (void)config_len;
  *state = NULL;
  return 0;
}
