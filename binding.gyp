{
  "targets": [
    {
      "target_name": "liken_native",
      "sources": [
        "native/addon.cc",
        "native/device.cc",
        "native/io.cc",
        "native/readback.cc",
        "native/writer.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": [
        "NAPI_VERSION=9",
        "NAPI_DISABLE_CPP_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED",
        "_FILE_OFFSET_BITS=64",
        "_GNU_SOURCE"
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O2"],
      "cflags": ["-Wall", "-Wextra", "-Werror", "-O2"]
    }
  ]
}
