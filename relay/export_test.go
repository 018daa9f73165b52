package relay

// RequestLimit is requestLimit, for the tests of package relay_test.
var RequestLimit = requestLimit
