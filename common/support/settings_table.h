// Settings a library takes and only a binary declares as flags. A library declares a table of rows
//   X(type, name, default, help)
// beside the struct it takes (a field per row, CONVOY_SETTING_MEMBER); every binary that takes
// those settings expands CONVOY_SETTINGS_FLAGS(TABLE, Struct, Reader) at global scope: the rows'
// flags, with one name, type, default and help in every binary, and `static Struct Reader()`, which
// reads them. A binary's flags are then what it declares, not what it links.
#ifndef CONVOY_COMMON_SUPPORT_SETTINGS_TABLE_H_
#define CONVOY_COMMON_SUPPORT_SETTINGS_TABLE_H_

#include "absl/flags/flag.h"

#define CONVOY_SETTING_MEMBER(type, name, def, help) type name = def;
#define CONVOY_SETTING_FLAG(type, name, def, help) ABSL_FLAG(type, name, def, help);
#define CONVOY_SETTING_READ(type, name, def, help) settings.name = absl::GetFlag(FLAGS_##name);

#define CONVOY_SETTINGS_FLAGS(TABLE, Struct, Reader) \
  TABLE(CONVOY_SETTING_FLAG)                         \
  static Struct Reader() {                           \
    Struct settings;                                 \
    TABLE(CONVOY_SETTING_READ)                       \
    return settings;                                 \
  }

#endif  // CONVOY_COMMON_SUPPORT_SETTINGS_TABLE_H_
