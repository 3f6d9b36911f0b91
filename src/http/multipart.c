/*
 * multipart.c - placeholder until the multipart parser lands.
 */
#include "tidegate/multipart.h"
