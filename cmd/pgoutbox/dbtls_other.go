//go:build !linux

package main

import "errors"

// memFile needs Linux's memfd: elsewhere, the files must be in a form pgx
// reads (PEM).
func memFile(name string, _ []byte) (string, error) {
	return "", errors.New("the " + name + " is in a form pgoutbox converts on Linux only: convert it to PEM")
}
