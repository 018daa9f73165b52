//go:build !idemgate_plant

package plant

// On reports whether bug n is planted. Without the idemgate_plant build tag
// it is false, a constant the compiler folds away.
func On(n int) bool { return false }
