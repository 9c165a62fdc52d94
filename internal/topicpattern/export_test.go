package topicpattern

// TreeCost is treeCost, for the external tests.
var TreeCost = treeCost
